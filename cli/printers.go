package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// objectPrinter is the printer of an -o that prints API objects as kubectl
// does (name, jsonpath=…, custom-columns=…), from k8s.io/cli-runtime; nil
// for Sunset's own formats (table, wide, json, yaml).
func objectPrinter(output string, noHeaders bool) (printers.ResourcePrinter, error) {
	kind, arg, _ := strings.Cut(output, "=")
	switch kind {
	case "name":
		return &printers.NamePrinter{}, nil
	case "jsonpath":
		if arg == "" {
			return nil, fmt.Errorf("-o jsonpath needs a template, e.g. -o jsonpath='{.items[*].metadata.name}'")
		}
		p, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return nil, fmt.Errorf("-o jsonpath: %w", err)
		}
		p.AllowMissingKeys(true)
		return p, nil
	case "custom-columns":
		return newCustomColumns(arg, noHeaders)
	}
	return nil, nil
}

// printObject prints an API object (or list) through p.
func printObject(w io.Writer, p printers.ResourcePrinter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, b)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}

// customColumns is kubectl's -o custom-columns=HEADER:.json.path,...: one
// row per object, each cell a JSONPath.
type customColumns struct {
	headers   []string
	paths     []*jsonpath.JSONPath
	noHeaders bool
}

func newCustomColumns(spec string, noHeaders bool) (*customColumns, error) {
	if spec == "" {
		return nil, fmt.Errorf("-o custom-columns needs columns, e.g. -o custom-columns=NAME:.metadata.name,REQUESTS:.status.requestCount")
	}
	c := &customColumns{noHeaders: noHeaders}
	for _, col := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("-o custom-columns: %q is not HEADER:.json.path", col)
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse("{" + strings.TrimSuffix(strings.TrimPrefix(path, "{"), "}") + "}"); err != nil {
			return nil, fmt.Errorf("-o custom-columns %s: %w", header, err)
		}
		c.headers, c.paths = append(c.headers, header), append(c.paths, jp)
	}
	return c, nil
}

// PrintObj implements printers.ResourcePrinter.
func (c *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if !c.noHeaders {
		fmt.Fprintln(tw, strings.Join(c.headers, "\t"))
	}
	for _, it := range items {
		u, ok := it.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("custom-columns: unexpected %T", it)
		}
		cells := make([]string, len(c.paths))
		for i, jp := range c.paths {
			results, err := jp.FindResults(u.Object)
			if err != nil {
				return err
			}
			var vals []string
			for _, r := range results {
				for _, v := range r {
					vals = append(vals, fmt.Sprint(v.Interface()))
				}
			}
			// A table like the others: its cells come from audit data.
			cells[i] = Terminal(strings.Join(vals, ","))
			if cells[i] == "" {
				cells[i] = "<none>"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
