package client

import (
	"net/url"

	sunsetv1 "github.com/kube-sunset/sunset/api/v1"
	"github.com/kube-sunset/sunset/catalog"
)

// CheckExemptions are the exemptions the server's upgrade check to target
// applies, expired ones included, so that a check decided here applies the
// same; none from a server too old to have any.
func (c *Client) CheckExemptions(target catalog.Release) ([]sunsetv1.Exemption, error) {
	res, err := get[sunsetv1.UpgradeCheck](c, "/apis/sunset.dev/v1/upgradechecks/"+url.PathEscape(target.String()), nil)
	if err != nil {
		return nil, err
	}
	return append(res.Status.Exemptions, res.Status.ExpiredExemptions...), nil
}
