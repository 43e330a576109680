package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var columnsRe = regexp.MustCompile(`\S+(?: \S+)*`)

// table reads rows whose cells are separated by two spaces or more, by
// the column names of header, or of the first line when header is nil.
func table(t *testing.T, text string, header []string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if header == nil {
		header, lines = columnsRe.FindAllString(lines[0], -1), lines[1:]
	}
	var rows []map[string]string
	for _, l := range lines {
		cells := columnsRe.FindAllString(l, -1)
		require.Len(t, cells, len(header), "%q has not the columns %q", l, header)
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func number(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err, "%q is not a count", s)
	return n
}

// section is the lines under a title up to a blank line.
func section(t *testing.T, out, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n"+title+"\n")
	require.True(t, ok, "no %q in\n%s", title, out)
	body, _, _ := strings.Cut(rest, "\n\n")
	return body
}
