package gui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// How a sandbox is described to people, in the main window's list and
// the review's header: its state and stage, what ran, where.

// agentTitle is the name for people of agent preset name among presets
// (name itself when none is that preset).
func agentTitle(presets []Preset, name string) string {
	for _, p := range presets {
		if p.Agent == name {
			return p.Title()
		}
	}
	return name
}

// describeRun is what a sandbox ran, for people: the agent's name
// (title gives it), the script's file name, or the command line.
func describeRun(m sandbox.Meta, title func(agent string) string) string {
	switch {
	case m.Agent != "":
		return title(m.Agent)
	case m.ScriptName != "":
		return safetext.Line(m.ScriptName)
	case len(m.Command) == 3 && m.Command[0] == "sh" && m.Command[1] == "-c":
		return safetext.Line(m.Command[2]) // a shell line, as typed
	}
	return safetext.Line(strings.Join(m.Command, " "))
}

// firstLine is the first non-blank line of s.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return safetext.Line(l)
		}
	}
	return ""
}

// excludedNote names the files a sandbox's snapshot left out because
// they look like secrets ("" when none): they never reached the VM.
func excludedNote(info sandbox.Info) string {
	return secretsNote(info.Secrets)
}

// secretsNote names secret paths left out of a copy, the first few by
// name.
func secretsNote(paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	const shown = 4
	names := make([]string, 0, shown)
	for _, p := range paths[:min(len(paths), shown)] {
		names = append(names, safetext.Line(p))
	}
	s := "Not copied into the sandbox, " + plural(len(paths), "looks like a secret", "look like secrets") + ": " + strings.Join(names, ", ")
	if len(paths) > shown {
		s += fmt.Sprintf(" and %d more (airlock logs --audit lists them)", len(paths)-shown)
	}
	return s
}

// statusText is a sandbox's state for people. A run whose process is gone
// (the VM died with it, or the process was killed) says so.
func statusText(info sandbox.Info) string {
	if info.Status.Active() && !info.Live {
		return "stopped: its VM is gone (was " + string(info.Status) + ")"
	}
	if info.Status == sandbox.StatusReady && info.ExitCode != nil && *info.ExitCode != 0 {
		return fmt.Sprintf("ready for review (exit %d)", *info.ExitCode)
	}
	return info.StatusText()
}

// runTitle is what a sandbox ran, for a header line: the agent (or
// script, or command line) and the user's prompt's first line, never the
// agent's command template (presets name the agents).
func runTitle(m sandbox.Meta, presets []Preset) string {
	who := describeRun(m, func(a string) string { return agentTitle(presets, a) })
	if task := firstLine(m.Prompt); task != "" {
		return who + ": " + task
	}
	return who
}

// projectName is a project's folder name, then where it is.
func projectName(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Base(p) + "  ·  " + shortPath(filepath.Dir(p))
}

// shortPath shows a path with the home directory as ~.
func shortPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "/" && strings.HasPrefix(p, home+"/") {
		return "~" + p[len(home):]
	}
	return p
}

// shortCommit is a commit's ID as git shows it short.
func shortCommit(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// stageText is a sandbox's stage beyond its state, for the main window
// ("committed", "pushed"; "" while the changes are in the sandbox or the
// working tree, which the state says), and the commit and branch for its
// tooltip.
func stageText(info sandbox.Info) (word, tip string) {
	p := info.Promotion
	if p == nil || (info.Stage != sandbox.StageCommitted && info.Stage != sandbox.StagePushed) {
		return "", ""
	}
	word = string(info.Stage)
	tip = "Committed " + shortCommit(p.Commit)
	switch {
	case p.NewBranch:
		tip += " on the new branch " + safetext.Line(p.Branch)
	case p.Branch != "":
		tip += " on " + safetext.Line(p.Branch)
	}
	if !p.Time.IsZero() {
		tip += ", " + p.Time.Local().Format("2 Jan 15:04")
	}
	if info.Stage == sandbox.StagePushed {
		tip += "; pushed"
		if p.Remote != "" {
			tip += " to " + safetext.Line(p.Remote)
		}
		if p.PullRequest != "" {
			tip += "; pull request " + safetext.Line(p.PullRequest)
		}
	}
	return word, tip
}
