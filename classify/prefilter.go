package classify

// Interest tells ingest which completed requests may count, so that it can
// set the others aside from their bytes alone, without decoding them.
//
// A completed request may count when it carries the k8s.io/deprecated
// annotation, when it is a 404 (an API the catalog lists as removed), when
// it carries admission webhook annotations, and as Interest says below.
type Interest struct {
	// AllCompleted means every completed request may count: a cluster's
	// version is configured, so the catalog judges requests that carry no
	// annotation.
	AllCompleted bool
	// Resources are those that field rules read request bodies of.
	Resources []string
}

// Interest says which completed requests may count.
func (c *Classifier) Interest() Interest {
	in := Interest{AllCompleted: len(c.versions) > 0}
	if c.fieldRules != nil {
		seen := map[string]bool{}
		for _, r := range c.fieldRules.Rules() {
			if !seen[r.Resource] {
				seen[r.Resource] = true
				in.Resources = append(in.Resources, r.Resource)
			}
		}
	}
	return in
}

// Prefiltered counts the events an ingest path set aside undecoded, by the
// result Ingest would have given them.
type Prefiltered struct {
	OtherStage    int
	NotDeprecated int
	// Reads is how many of them were a get, list or watch, for the
	// warning about clusters whose reads Sunset cannot see.
	Reads int
}

// SetAside is what an ingest path knows of an event it set aside
// undecoded.
type SetAside struct {
	// Result is ResultOtherStage or ResultNotDeprecated.
	Result Result
	// Read is set when its verb was get, list or watch.
	Read bool
}

// Add records one event set aside.
func (p *Prefiltered) Add(s SetAside) {
	if s.Result == ResultOtherStage {
		p.OtherStage++
	} else {
		p.NotDeprecated++
	}
	if s.Read {
		p.Reads++
	}
}

// Merge adds the counts of q to p.
func (p *Prefiltered) Merge(q Prefiltered) {
	p.OtherStage += q.OtherStage
	p.NotDeprecated += q.NotDeprecated
	p.Reads += q.Reads
}

// AddPrefiltered adds events set aside by an ingest path to s.
func (s *Summary) AddPrefiltered(p Prefiltered) {
	for r, n := range map[Result]int{ResultOtherStage: p.OtherStage, ResultNotDeprecated: p.NotDeprecated} {
		if n == 0 {
			continue
		}
		s.Skipped += n
		if s.SkippedBy == nil {
			s.SkippedBy = map[string]int{}
		}
		s.SkippedBy[string(r)] += n
	}
}
