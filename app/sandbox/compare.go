package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// Comparison is one sandbox as airlock compare shows it beside others.
type Comparison struct {
	ID      string `json:"id"`
	Group   string `json:"group,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Agent is the agent preset that ran, if any.
	Agent  string `json:"agent,omitempty"`
	Status Status `json:"status"`
	// ExitCode is the command's, once it ran.
	ExitCode *int          `json:"exit_code,omitempty"`
	Verify   *VerifyResult `json:"verify,omitempty"`
	Changes  *ChangeStats  `json:"changes,omitempty"`
	// Rationale is the first line of the agent's summary, or else of its
	// final message ("" if neither).
	Rationale string `json:"rationale,omitempty"`
	Command   string `json:"command"`
	Error     string `json:"error,omitempty"`
}

// CompareHeader names the columns of Comparison.Cells.
var CompareHeader = []string{"#", "ID", "AGENT", "STATUS", "EXIT", "VERIFY", "FILES", "LINES", "RATIONALE"}

// Cells is the comparison as one row of text, in CompareHeader's order
// ("-" where there is nothing to say); a failed sandbox's rationale is its
// error.
func (c Comparison) Cells() []string {
	attempt, agent, exit, files, lines := "-", "-", "-", "-", "-"
	if c.Agent != "" {
		agent = c.Agent
	}
	if c.Attempt > 0 {
		attempt = fmt.Sprint(c.Attempt)
	}
	if c.ExitCode != nil {
		exit = fmt.Sprint(*c.ExitCode)
	}
	if c.Changes != nil {
		files = fmt.Sprint(c.Changes.Files)
		lines = fmt.Sprintf("+%d -%d", c.Changes.LinesAdded, c.Changes.LinesRemoved)
	}
	why := c.Rationale
	if c.Error != "" {
		why = "failed: " + c.Error
	}
	return []string{attempt, c.ID, agent, string(c.Status), exit, c.Verify.String(), files, lines, why}
}

// Compare describes each sandbox for a side-by-side comparison. An ID
// that names a fan-out group (as recorded in its sandboxes) stands for
// every sandbox of that group, in attempt order.
func (s *Store) Compare(ids []string) ([]Comparison, error) {
	list, err := s.List()
	if err != nil {
		return nil, err
	}
	var out []Comparison
	seen := map[string]bool{}
	add := func(sb *Sandbox, m Meta) {
		if seen[m.ID] {
			return
		}
		seen[m.ID] = true
		c := Comparison{ID: m.ID, Group: m.Group, Attempt: m.Attempt, Agent: m.Agent, Status: m.Status, ExitCode: m.ExitCode, Verify: m.Verify,
			Changes: m.Changes, Command: m.CommandLine(), Error: m.Error}
		if sum, err := sb.Summary(); err == nil && sum != "" {
			c.Rationale = firstLine(sum)
		} else if final, err := sb.FinalMessage(); err == nil {
			c.Rationale = firstLine(final)
		}
		out = append(out, c)
	}
	for _, id := range ids {
		var members []Info
		for i := len(list) - 1; i >= 0; i-- { // oldest first
			if list[i].Group == id {
				members = append(members, list[i])
			}
		}
		if len(members) > 0 {
			slices.SortStableFunc(members, func(a, b Info) int { return a.Attempt - b.Attempt })
			for _, m := range members {
				sb, err := s.Get(m.ID)
				if err != nil {
					return nil, err
				}
				add(sb, m.Meta)
			}
			continue
		}
		sb, err := s.Get(id)
		if err != nil {
			return nil, err
		}
		m, err := sb.Meta()
		if err != nil {
			return nil, err
		}
		add(sb, m)
	}
	return out, nil
}

// firstLine is the first non-empty line of a summary, without a Markdown
// heading's hashes.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if line != "" {
			return line
		}
	}
	return ""
}
