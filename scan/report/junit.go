package report

import (
	"encoding/xml"
	"fmt"
	"io"

	"github.com/kube-sunset/sunset/catalog"
)

// JUnit XML as CI systems read test reports (the Ant/Jenkins schema that
// GitLab, GitHub Actions reporters and Jenkins accept). Each finding is a
// test case; a removed API fails it, a deprecated one is a passing case
// with the warning in system-out, so that a report shows both without the
// deprecated ones breaking the build. Unreadable inputs are errors.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Skipped  int         `xml:"skipped,attr"`
		Cases    []junitCase `xml:"testcase"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		File      string        `xml:"file,attr,omitempty"`
		Line      int           `xml:"line,attr,omitempty"`
		Failure   *junitProblem `xml:"failure,omitempty"`
		Error     *junitProblem `xml:"error,omitempty"`
		Skipped   *junitProblem `xml:"skipped,omitempty"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
		Text    string `xml:",chardata"`
	}
)

func (r Result) writeJUnit(w io.Writer) error {
	suite := junitSuite{Name: "sunset scan for Kubernetes " + r.TargetVersion}
	for _, f := range r.Findings {
		c := junitCase{Name: fmt.Sprintf("%s %s %s (%s)", f.APIVersion, f.Kind, f.Name, f.Origin), Classname: f.Rule}
		c.File, c.Line, _ = f.Origin.fileLine()
		if f.Severity == catalog.StateRemoved {
			c.Failure = &junitProblem{Message: f.Message, Type: f.Rule, Text: f.Status()}
			suite.Failures++
		} else {
			c.SystemOut = f.Message
		}
		suite.Cases = append(suite.Cases, c)
	}
	for _, e := range r.Errors {
		suite.Cases = append(suite.Cases, junitCase{Name: e.Path, Classname: "input", Error: &junitProblem{Message: e.Err, Type: "unreadable"}})
		suite.Errors++
	}
	for _, n := range r.NotScanned {
		suite.Cases = append(suite.Cases, junitCase{Name: n.String(), Classname: "not-scanned", Skipped: &junitProblem{Message: n.Reason}})
		suite.Skipped++
	}
	for _, s := range r.Skipped {
		suite.Cases = append(suite.Cases, junitCase{Name: s.Path, Classname: "skipped", Skipped: &junitProblem{Message: s.Reason}})
		suite.Skipped++
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "sunset scan", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s%s\n", xml.Header, b)
	return err
}
