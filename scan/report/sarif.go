package report

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/kube-sunset/sunset/catalog"
)

// SARIF 2.1.0 (OASIS), the format code scanning services read. Only the
// parts Sunset fills are declared.
type (
	sarifLog struct {
		Version string     `json:"version"`
		Schema  string     `json:"$schema"`
		Runs    []sarifRun `json:"runs"`
	}
	sarifRun struct {
		Tool        sarifTool         `json:"tool"`
		Results     []sarifResult     `json:"results"`
		Invocations []sarifInvocation `json:"invocations"`
	}
	sarifTool struct {
		Driver sarifDriver `json:"driver"`
	}
	sarifDriver struct {
		Name           string      `json:"name"`
		InformationURI string      `json:"informationUri"`
		Version        string      `json:"version,omitempty"`
		Rules          []sarifRule `json:"rules"`
	}
	sarifRule struct {
		ID                   string       `json:"id"`
		ShortDescription     sarifMessage `json:"shortDescription"`
		HelpURI              string       `json:"helpUri"`
		DefaultConfiguration struct {
			Level string `json:"level"`
		} `json:"defaultConfiguration"`
	}
	sarifMessage struct {
		Text string `json:"text"`
	}
	sarifResult struct {
		RuleID     string          `json:"ruleId"`
		Level      string          `json:"level"`
		Message    sarifMessage    `json:"message"`
		Locations  []sarifLocation `json:"locations"`
		Properties map[string]any  `json:"properties,omitempty"`
	}
	sarifLocation struct {
		PhysicalLocation *sarifPhysical `json:"physicalLocation,omitempty"`
		LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
	}
	sarifPhysical struct {
		ArtifactLocation struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
		Region *struct {
			StartLine int `json:"startLine"`
		} `json:"region,omitempty"`
	}
	sarifLogical struct {
		FullyQualifiedName string `json:"fullyQualifiedName"`
		Kind               string `json:"kind"`
	}
	sarifInvocation struct {
		ExecutionSuccessful        bool                `json:"executionSuccessful"`
		ToolExecutionNotifications []sarifNotification `json:"toolExecutionNotifications,omitempty"`
	}
	sarifNotification struct {
		Level   string       `json:"level"`
		Message sarifMessage `json:"message"`
	}
)

const docsURI = "https://github.com/kube-sunset/sunset/blob/main/docs/scanning.md"

var sarifRules = []struct{ id, text, level string }{
	{RuleRemovedAPI, "Uses a Kubernetes API removed in or before the target release", "error"},
	{RuleDeprecatedAPI, "Uses a deprecated Kubernetes API", "warning"},
	{RuleDeprecatedField, "Sets a deprecated field", "warning"},
	{RuleCRDStoredVersion, "A CRD still stores objects at a deprecated or unserved version", "warning"},
	{RuleAPIService, "An APIService registers a group version Kubernetes removes", "warning"},
}

// writeSARIF writes one run. A finding's level is its severity at the
// target (removed: error), not its rule's default. Findings in a cluster
// have no file: they carry a logical location (the release or object).
func (r Result) writeSARIF(w io.Writer, version string) error {
	driver := sarifDriver{Name: "sunset", InformationURI: "https://github.com/kube-sunset/sunset", Version: version}
	for _, rule := range sarifRules {
		sr := sarifRule{ID: rule.id, ShortDescription: sarifMessage{rule.text}, HelpURI: docsURI}
		sr.DefaultConfiguration.Level = rule.level
		driver.Rules = append(driver.Rules, sr)
	}
	run := sarifRun{Tool: sarifTool{driver}, Results: []sarifResult{}, Invocations: []sarifInvocation{{ExecutionSuccessful: len(r.Errors) == 0}}}
	for _, f := range r.Findings {
		level := "warning"
		if f.Severity == catalog.StateRemoved {
			level = "error"
		}
		msg := f.Message
		if f.Name != "" {
			msg = fmt.Sprintf("%s %s: %s", f.Kind, f.Name, f.Message)
		}
		res := sarifResult{RuleID: f.Rule, Level: level, Message: sarifMessage{msg}, Locations: []sarifLocation{f.Origin.sarifLocation()},
			Properties: map[string]any{"apiVersion": f.APIVersion, "kind": f.Kind, "severity": f.Severity, "source": f.Source}}
		run.Results = append(run.Results, res)
	}
	inv := &run.Invocations[0]
	for _, e := range r.Errors {
		inv.ToolExecutionNotifications = append(inv.ToolExecutionNotifications, sarifNotification{"error", sarifMessage{e.String()}})
	}
	for _, n := range r.NotScanned {
		inv.ToolExecutionNotifications = append(inv.ToolExecutionNotifications, sarifNotification{"warning", sarifMessage{n.String()}})
	}
	for _, s := range r.Skipped {
		inv.ToolExecutionNotifications = append(inv.ToolExecutionNotifications, sarifNotification{"note", sarifMessage{"skipped " + s.String()}})
	}
	b, err := json.MarshalIndent(sarifLog{Version: "2.1.0", Schema: "https://json.schemastore.org/sarif-2.1.0.json", Runs: []sarifRun{run}}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (o Origin) sarifLocation() sarifLocation {
	file, line, ok := o.fileLine()
	if !ok {
		return sarifLocation{LogicalLocations: []sarifLogical{{FullyQualifiedName: o.String(), Kind: "resource"}}}
	}
	loc := &sarifPhysical{}
	loc.ArtifactLocation.URI = (&url.URL{Path: file}).String()
	if line > 0 {
		loc.Region = &struct {
			StartLine int `json:"startLine"`
		}{line}
	}
	return sarifLocation{PhysicalLocation: loc}
}

// fileLine is the file (with forward slashes) and line a report points
// at: the manifest, the kustomization's resource file, or the chart's
// template file. ok is false for objects read from a cluster.
func (o Origin) fileLine() (file string, line int, ok bool) {
	switch {
	case o.Release != "" || o.Object != "":
		return "", 0, false
	case o.File != "":
		return path.Join(filepath.ToSlash(o.Path), filepath.ToSlash(o.File)), o.Line, true
	case o.Template != "":
		// Helm names a template after its chart ("web/templates/x.yaml"),
		// which the chart's own path already says.
		_, rest, _ := strings.Cut(o.Template, "/")
		return path.Join(filepath.ToSlash(o.Path), rest), 0, true
	}
	return filepath.ToSlash(o.Path), o.Line, true
}
