package feature

import (
	"fmt"
	"slices"
	"strings"
)

// BaseRef is a feature reference without its tag or digest, as
// installsAfter and dependsOn compare them
// ("ghcr.io/devcontainers/features/node:1" → "ghcr.io/devcontainers/features/node").
func BaseRef(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return strings.ToLower(ref)
}

// Order is the order features install in, as the spec has it: a feature
// after every feature its dependsOn names (which must be there: Airlock
// does not fetch what a feature's metadata asks for unconfirmed) and
// after those its installsAfter names that are installed too; otherwise
// in the order given (devcontainer.json's, by ID). It returns indexes
// into refs, or an error for a missing dependency or a cycle.
func Order(refs []string, metas []*Metadata) ([]int, error) {
	index := map[string]int{}
	for i, r := range refs {
		index[BaseRef(r)] = i
	}
	after := make([][]int, len(refs)) // what each must come after
	for i, m := range metas {
		for dep := range m.DependsOn {
			j, ok := index[BaseRef(dep)]
			if !ok {
				return nil, fmt.Errorf("feature %s depends on %s, which devcontainer.json does not ask for: add it to features", refs[i], dep)
			}
			after[i] = append(after[i], j)
		}
		for _, a := range m.InstallsAfter {
			if j, ok := index[BaseRef(a)]; ok && j != i {
				after[i] = append(after[i], j)
			}
		}
	}
	var out []int
	done := make([]bool, len(refs))
	for len(out) < len(refs) {
		// The first feature, in the order given, whose predecessors are
		// all installed.
		next := -1
		for i := range refs {
			if !done[i] && !slices.ContainsFunc(after[i], func(j int) bool { return !done[j] }) {
				next = i
				break
			}
		}
		if next >= 0 {
			done[next] = true
			out = append(out, next)
		} else {
			var left []string
			for i, d := range done {
				if !d {
					left = append(left, refs[i])
				}
			}
			return nil, fmt.Errorf("features %s wait on each other (dependsOn, installsAfter): they cannot be ordered", strings.Join(left, ", "))
		}
	}
	return out, nil
}
