package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
	"github.com/kube-sunset/sunset/internal/httpjson"
	"github.com/kube-sunset/sunset/verdict"
)

func newUpgradeCheck(res sunsetv1.CheckResult) sunsetv1.UpgradeCheck {
	return sunsetv1.UpgradeCheck{TypeMeta: typeMeta("UpgradeCheck"), Metadata: metav1.ObjectMeta{Name: res.TargetVersion}, Status: res}
}

// Exemptions are the exemptions in force for every upgrade check: the
// config's and its ConfigMap's, as last read.
type Exemptions interface {
	Exemptions() []sunsetv1.Exemption
}

// WithExemptions makes every upgrade check that names none apply e's.
func (s *Service) WithExemptions(e Exemptions) { s.exemptions = e }

// CheckExemptions are the exemptions every upgrade check applies, as a
// reader of a data directory offers them to `sunset check`.
func (s *Service) CheckExemptions(catalog.Release) ([]sunsetv1.Exemption, error) {
	if s.exemptions == nil {
		return nil, nil
	}
	return s.exemptions.Exemptions(), nil
}

// checkOptions fills what o leaves to the server: the clock and the
// exemptions.
func (s *Service) checkOptions(o verdict.CheckOptions) verdict.CheckOptions {
	if o.Now.IsZero() {
		o.Now = s.now()
	}
	if o.Exemptions == nil && s.exemptions != nil {
		o.Exemptions = s.exemptions.Exemptions()
	}
	return o
}

// UpgradeCheck checks an upgrade to o.Target against what was requested in
// q's window and cluster. A zero o.Now is the server's clock, and nil
// o.Exemptions the server's exemptions (WithExemptions).
func (s *Service) UpgradeCheck(q sunsetv1.Query, o verdict.CheckOptions) (sunsetv1.UpgradeCheck, error) {
	o = s.checkOptions(o)
	list, err := s.List(checkQuery(q, o))
	if err != nil {
		return sunsetv1.UpgradeCheck{}, err
	}
	res := s.withClusterScan(verdict.Check(list, o), o)
	if res.GateOverrides, err = s.gateOverrides(q, o); err != nil {
		return sunsetv1.UpgradeCheck{}, err
	}
	return newUpgradeCheck(res), nil
}

// UpgradeChecks checks an upgrade to every release that removes an API or
// refuses a flagged certificate (o.Target is ignored).
func (s *Service) UpgradeChecks(q sunsetv1.Query, o verdict.CheckOptions) (sunsetv1.UpgradeCheckList, error) {
	out := sunsetv1.UpgradeCheckList{TypeMeta: typeMeta("UpgradeCheckList"), Items: []sunsetv1.UpgradeCheck{}}
	o = s.checkOptions(o)
	list, err := s.List(checkQuery(q, o))
	if err != nil {
		return out, err
	}
	overrides, err := s.gateOverrides(q, o)
	if err != nil {
		return out, err
	}
	for _, target := range s.removalReleases(list, o.WebhookCertificates) {
		o.Target = target
		res := s.withClusterScan(verdict.Check(list, o), o)
		res.GateOverrides = overrides
		out.Items = append(out.Items, newUpgradeCheck(res))
	}
	return out, nil
}

// checkQuery is the list read a check needs: the window, and enough users
// that the top non-system clients are known even when system identities
// lead.
func checkQuery(q sunsetv1.Query, o verdict.CheckOptions) sunsetv1.Query {
	return sunsetv1.Query{Cluster: q.Cluster, Since: o.Since, Users: sunsetv1.MaxUsersToReport}
}

// removalReleases are the releases in which the catalog or list removes an
// API, or kube-apiserver starts refusing one of certs, oldest first.
func (s *Service) removalReleases(list sunsetv1.APIRequestCountList, certs []sunsetv1.WebhookCertificate) []catalog.Release {
	seen := map[catalog.Release]bool{}
	add := func(rel string) {
		if r, err := catalog.ParseRelease(rel); err == nil {
			seen[r] = true
		}
	}
	for _, e := range s.catalog.Entries() {
		add(e.RemovedIn)
	}
	for _, it := range list.Items {
		add(it.Status.RemovedInRelease)
	}
	for _, c := range certs {
		add(c.RefusedByDefaultInRelease)
		add(c.RefusedInRelease)
	}
	out := make([]catalog.Release, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b catalog.Release) int {
		return cmp.Or(cmp.Compare(a.Major, b.Major), cmp.Compare(a.Minor, b.Minor))
	})
	return out
}

const checksPath = "/apis/" + sunsetv1.APIVersion + "/" + "upgradechecks"

var checkParams = []string{"cleanFor", "cluster", "excludeSystem", "from", "since", "warningsAsErrors"}

func (h *Handler) listChecks(w http.ResponseWriter, r *http.Request) {
	q, o, ok := h.beginCheck(w, r)
	if !ok {
		return
	}
	var err error
	if o.WebhookCertificates, err = h.webhookCertificates(q, o); err != nil {
		h.internalError(w, err)
		return
	}
	list, err := h.svc.UpgradeChecks(q, o)
	if err != nil {
		h.internalError(w, err)
		return
	}
	h.write(w, r, list, checkTable(list.Items))
}

func (h *Handler) getCheck(w http.ResponseWriter, r *http.Request) {
	q, o, ok := h.beginCheck(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	target, err := catalog.ParseRelease(name)
	if err != nil {
		httpjson.Error(w, http.StatusNotFound, httpjson.ReasonNotFound, fmt.Sprintf("upgradechecks %q not found: name a target release such as 1.37", name))
		return
	}
	if !o.From.IsZero() && !o.From.Less(target) {
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, fmt.Sprintf("from %s is not before the target %s", o.From, target))
		return
	}
	o.Target = target
	if o.WebhookCertificates, err = h.webhookCertificates(q, o); err != nil {
		h.internalError(w, err)
		return
	}
	res, err := h.svc.UpgradeCheck(q, o)
	if err != nil {
		h.internalError(w, err)
		return
	}
	h.write(w, r, res, checkTable([]sunsetv1.UpgradeCheck{res}))
}

// webhookCertificates are the flagged webhook servers of the check's window
// and cluster; none without admission webhook counts.
func (h *Handler) webhookCertificates(q sunsetv1.Query, o verdict.CheckOptions) ([]sunsetv1.WebhookCertificate, error) {
	if h.webhooks == nil {
		return nil, nil
	}
	list, err := h.webhooks.Webhooks(sunsetv1.WebhookQuery{Cluster: q.Cluster, Since: o.Since})
	return list.Certificates, err
}

// beginCheck reads the parameters of an upgrade check: since (default
// 24h), cluster, excludeSystem (default true), warningsAsErrors, cleanFor
// (whole hours, as since) and from (a release).
func (h *Handler) beginCheck(w http.ResponseWriter, r *http.Request) (sunsetv1.Query, verdict.CheckOptions, bool) {
	if !readMethod(w, r, false) {
		return sunsetv1.Query{}, verdict.CheckOptions{}, false
	}
	v := r.URL.Query()
	o := verdict.CheckOptions{ExcludeSystem: true}
	var problems []string
	for key, dst := range map[string]*bool{"excludeSystem": &o.ExcludeSystem, "warningsAsErrors": &o.WarningsAsErrors} {
		if s := v.Get(key); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s %q is not true or false", key, s))
			}
			*dst = b
		}
	}
	if s := v.Get("cleanFor"); s != "" {
		var problem string
		if o.CleanFor, problem = parseHours("cleanFor", s, 0); problem != "" {
			problems = append(problems, problem)
		}
	}
	if s := v.Get("from"); s != "" {
		from, err := catalog.ParseRelease(s)
		if err != nil {
			problems = append(problems, "from: "+err.Error())
		}
		o.From = from
	}
	q, err := ParseQuery(withoutKube(v, kubePagingParams), checkParams, h.maxSince)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		httpjson.Error(w, http.StatusBadRequest, httpjson.ReasonBadRequest, strings.Join(problems, "; "))
		return sunsetv1.Query{}, verdict.CheckOptions{}, false
	}
	o.Since = cmp.Or(q.Since, sunsetv1.DefaultCheckSince)
	return q, o, true
}
