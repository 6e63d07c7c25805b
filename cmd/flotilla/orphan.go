package main

import (
	"fmt"
	"strings"
)

// countByKind sums "kind name" entries: "3 resource(s): 2 service, 1 config".
func countByKind(items []string) string {
	n := map[string]int{}
	var order []string
	for _, it := range items {
		kind, _, _ := strings.Cut(it, " ")
		if n[kind] == 0 {
			order = append(order, kind)
		}
		n[kind]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	out := fmt.Sprintf("%d resource(s)", len(items))
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}
