package semantic

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// minRenameTokens is the fewest tokens a declaration needs (signature and
// body) to be taken for a renamed one: two small declarations alike by
// chance ("return nil") are an addition and a removal.
const minRenameTokens = 8

// renameSimilarity is how alike (0 to 1) a removed and an added
// declaration's tokens must be for the added one to be the removed one
// renamed.
const renameSimilarity = 0.8

// compare lists the changes from the old declarations to the new ones:
// those of the same kind and name are paired (and reported when their
// signature or body differs, or when they moved); what is left is paired
// as renames when alike enough, and the rest is added or removed. The
// order is the new file's, removals last in the old file's order.
func compare(old, new []decl) []Change {
	oldKeys, newKeys := keys(old), keys(new)
	newAt := map[string]int{}
	for i, k := range newKeys {
		newAt[k] = i
	}
	var changes []Change
	pairedNew := make([]bool, len(new))
	pairedOld := make([]bool, len(old))
	var pairs [][2]int // old index, new index
	for i, k := range oldKeys {
		if j, ok := newAt[k]; ok {
			pairedOld[i], pairedNew[j] = true, true
			pairs = append(pairs, [2]int{i, j})
		}
	}
	// An overload whose parameters changed has another key: pair it by
	// its name when that leaves no doubt.
	pairByName(old, new, pairedOld, pairedNew, &pairs)

	moved := movedPairs(pairs)
	for n, p := range pairs {
		o, nw := &old[p[0]], &new[p[1]]
		c := Change{Op: Changed, Kind: nw.kind, Name: nw.name, Line: nw.line}
		diffParts(&c, o, nw)
		switch {
		case c.Signature || c.Body:
		case moved[n]:
			c.Op = Moved
		default:
			continue
		}
		changes = append(changes, c)
	}
	for _, r := range renames(old, new, pairedOld, pairedNew) {
		o, nw := &old[r[0]], &new[r[1]]
		c := Change{Op: Renamed, Kind: nw.kind, Name: nw.name, OldName: o.name, Line: nw.line}
		diffParts(&c, o, nw)
		changes = append(changes, c)
	}
	for j := range new {
		if !pairedNew[j] {
			changes = append(changes, Change{Op: Added, Kind: new[j].kind, Name: new[j].name, Line: new[j].line})
		}
	}
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].Line < changes[b].Line })
	for i := range old {
		if !pairedOld[i] {
			changes = append(changes, Change{Op: Removed, Kind: old[i].kind, Name: old[i].name, Line: old[i].line})
		}
	}
	return changes
}

// keys names each declaration by its kind and name; a name declared more
// than once in a side (overloads) gets its parameters too.
func keys(ds []decl) []string {
	count := map[string]int{}
	for _, d := range ds {
		count[string(d.kind)+" "+d.name]++
	}
	out := make([]string, len(ds))
	seen := map[string]int{}
	for i, d := range ds {
		k := string(d.kind) + " " + d.name
		if count[k] > 1 {
			k += "(" + strings.Join(strings.Fields(d.sigText), " ") + ")"
			if seen[k]++; seen[k] > 1 {
				// Two declarations alike in every way (redefinitions,
				// or one per preprocessor branch): keep them apart.
				k += "#" + strconv.Itoa(seen[k])
			}
		}
		out[i] = k
	}
	return out
}

// pairByName pairs unpaired declarations that share a kind and a name and
// are the only ones unpaired of that name on each side.
func pairByName(old, new []decl, pairedOld, pairedNew []bool, pairs *[][2]int) {
	type slot struct{ old, new []int }
	by := map[string]*slot{}
	at := func(d decl) *slot {
		k := string(d.kind) + " " + d.name
		if by[k] == nil {
			by[k] = &slot{}
		}
		return by[k]
	}
	for i, d := range old {
		if !pairedOld[i] {
			s := at(d)
			s.old = append(s.old, i)
		}
	}
	for j, d := range new {
		if !pairedNew[j] {
			s := at(d)
			s.new = append(s.new, j)
		}
	}
	for _, s := range by {
		if len(s.old) == 1 && len(s.new) == 1 {
			i, j := s.old[0], s.new[0]
			pairedOld[i], pairedNew[j] = true, true
			*pairs = append(*pairs, [2]int{i, j})
		}
	}
	sort.Slice(*pairs, func(a, b int) bool { return (*pairs)[a][1] < (*pairs)[b][1] })
}

// diffParts sets what differs between two versions of a declaration.
func diffParts(c *Change, o, n *decl) {
	if o.sigText != n.sigText || o.bodyText != n.bodyText {
		o.tokens()
		n.tokens()
		c.Signature = !slices.Equal(o.sig, n.sig)
		c.Body = !slices.Equal(o.body, n.body)
	}
	if !c.Signature {
		return
	}
	in := func(list []string, p string) bool { return slices.Contains(list, p) }
	for _, p := range n.params {
		if !in(o.params, p) {
			c.NewParams = append(c.NewParams, p)
		}
	}
	for _, p := range o.params {
		if !in(n.params, p) {
			c.RemovedParams = append(c.RemovedParams, p)
		}
	}
}

// movedPairs marks the pairs (in new order) that are not in the longest
// run of pairs keeping their old order: those moved. Of two runs as long,
// the one that keeps the earlier declarations of the new file wins (a, b
// → b, a is "a moved").
func movedPairs(pairs [][2]int) []bool {
	n := len(pairs)
	moved := make([]bool, n)
	if n < 2 {
		return moved
	}
	// Longest decreasing run of old indexes read from the end (the
	// longest increasing one, read forwards), O(n log n).
	tails := []int{} // index into pairs of the best tail per length
	prev := make([]int, n)
	for i := n - 1; i >= 0; i-- {
		v := pairs[i][0]
		k := sort.Search(len(tails), func(k int) bool { return pairs[tails[k]][0] <= v })
		prev[i] = -1
		if k > 0 {
			prev[i] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	for i := range moved {
		moved[i] = true
	}
	for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
		moved[i] = false
	}
	return moved
}

// maxRenamePairs and maxRenameWork bound the work of looking for renames:
// the pairs of a removed and an added declaration, and the distinct
// tokens merged over all of them. Past either (hundreds of large
// declarations unpaired on each side, which a hostile file can be made
// of) none is looked for and they stay added and removed: about half a
// second of work at most.
const (
	maxRenamePairs = 250_000
	maxRenameWork  = 40_000_000
)

// renames pairs unpaired removed and added declarations of a like kind
// whose tokens are alike, the most alike first.
func renames(old, new []decl, pairedOld, pairedNew []bool) [][2]int {
	ids := map[string]int32{}
	free := func(ds []decl, paired []bool) (idx []int, bags []bag, work int) {
		for i := range ds {
			if paired[i] || tokenCount(&ds[i]) < minRenameTokens {
				continue
			}
			b := bagOf(&ds[i], ids)
			idx, bags = append(idx, i), append(bags, b)
			work += len(b.ids)
		}
		return idx, bags, work
	}
	oldFree, oldBags, oldWork := free(old, pairedOld)
	newFree, newBags, newWork := free(new, pairedNew)
	// Every pair merges the two bags' distinct tokens.
	if len(oldFree)*len(newFree) > maxRenamePairs || oldWork*len(newFree)+newWork*len(oldFree) > maxRenameWork {
		return nil
	}
	type cand struct {
		i, j  int
		score float64
	}
	var cands []cand
	for a, i := range oldFree {
		for b, j := range newFree {
			if !sameFamily(old[i].kind, new[j].kind) {
				continue
			}
			if s := similarity(oldBags[a], newBags[b]); s >= renameSimilarity {
				cands = append(cands, cand{i, j, s})
			}
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	var out [][2]int
	for _, c := range cands {
		if pairedOld[c.i] || pairedNew[c.j] {
			continue
		}
		pairedOld[c.i], pairedNew[c.j] = true, true
		out = append(out, [2]int{c.i, c.j})
	}
	return out
}

func tokenCount(d *decl) int {
	d.tokens()
	return len(d.sig) + len(d.body)
}

// sameFamily reports whether a declaration of kind a may have become one
// of kind b by a rename: a function may become a method and back.
func sameFamily(a, b Kind) bool {
	fn := func(k Kind) bool { return k == Function || k == Method }
	return a == b || fn(a) && fn(b)
}

// bag is a declaration's tokens as a multiset: each distinct token's id
// (interned across both sides), in increasing order, with its count.
type bag struct {
	ids    []int32
	counts []int32
	total  int
}

func bagOf(d *decl, ids map[string]int32) bag {
	counts := map[int32]int32{}
	for _, part := range [][]string{d.sig, d.body} {
		for _, t := range part {
			id, ok := ids[t]
			if !ok {
				id = int32(len(ids))
				ids[t] = id
			}
			counts[id]++
		}
	}
	b := bag{ids: make([]int32, 0, len(counts)), total: len(d.sig) + len(d.body)}
	for id := range counts {
		b.ids = append(b.ids, id)
	}
	slices.Sort(b.ids)
	b.counts = make([]int32, len(b.ids))
	for k, id := range b.ids {
		b.counts[k] = counts[id]
	}
	return b
}

// similarity is the Dice coefficient of two token multisets: 1 for the
// same tokens in any order. Bags too unlike in size to reach
// renameSimilarity are not merged.
func similarity(a, b bag) float64 {
	if 2*float64(min(a.total, b.total)) < renameSimilarity*float64(a.total+b.total) {
		return 0
	}
	common := 0
	for x, y := 0, 0; x < len(a.ids) && y < len(b.ids); {
		switch {
		case a.ids[x] < b.ids[y]:
			x++
		case a.ids[x] > b.ids[y]:
			y++
		default:
			common += int(min(a.counts[x], b.counts[y]))
			x++
			y++
		}
	}
	return 2 * float64(common) / float64(a.total+b.total)
}
