package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
)

func newLogsCmd(e *env) *cobra.Command {
	var auditOnly bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show a sandbox's transcript, the agent's summary and its audit log",
		Long: `logs prints what the command printed (the transcript), the agent's
summary, and the audit log (created, excluded files, pushed, command and
exit, collected, decisions, applies with before/after hashes, undo).
--audit prints the audit log as it is stored, one JSON object per line.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogs(cmd.Context(), e, args[0], auditOnly)
		},
	}
	cmd.Flags().BoolVar(&auditOnly, "audit", false, "print only the audit log, as JSON lines")
	return cmd
}

// sandboxLogs is what airlock logs shows of a sandbox (and prints with
// --json).
type sandboxLogs struct {
	Sandbox      string          `json:"sandbox"`
	Transcript   string          `json:"transcript"`
	Summary      string          `json:"summary"`
	FinalMessage string          `json:"final_message"`
	Verify       string          `json:"verify"`
	Audit        []sandbox.Event `json:"audit"`

	hasVerify bool
	verifyRes string // the verify step's result, for its heading
}

// runLogs shows sandbox id's logs, or with auditOnly its audit log as
// stored.
func runLogs(ctx context.Context, e *env, id string, auditOnly bool) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	if auditOnly {
		raw, err := sb.AuditRaw()
		if err != nil {
			return err
		}
		// As stored; on a terminal, the paths and messages it holds from
		// the guest are shown safely.
		_, err = io.WriteString(e.stdout, shown(e.stdout, string(raw)))
		return err
	}
	l, err := readLogs(sb)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(l)
	}
	printLogs(e.stdout, sb, l)
	return nil
}

func readLogs(sb *sandbox.Sandbox) (sandboxLogs, error) {
	l := sandboxLogs{Sandbox: sb.ID}
	transcript, err := sb.Transcript()
	if err != nil {
		return l, err
	}
	if l.Summary, err = sb.Summary(); err != nil {
		return l, err
	}
	if l.Audit, err = sb.ReadAudit(); err != nil {
		return l, err
	}
	verifyLog, err := sb.VerifyLog()
	if err != nil {
		return l, err
	}
	if l.FinalMessage, err = sb.FinalMessage(); err != nil {
		return l, err
	}
	l.Transcript, l.Verify, l.hasVerify = string(transcript), string(verifyLog), verifyLog != nil
	if l.hasVerify {
		m, _ := sb.Meta()
		l.verifyRes = m.Verify.String()
	}
	return l, nil
}

// printLogs writes l for people. Everything but the headings came from
// the guest: on a terminal it is shown safely (the transcript's own
// control sequences as visible escapes, not replayed), else as it is.
func printLogs(w io.Writer, sb *sandbox.Sandbox, l sandboxLogs) {
	section := func(text string) {
		io.WriteString(w, shown(w, text))
		if text != "" && !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "== transcript (%s)\n", sb.Path(sandbox.TranscriptFile))
	section(l.Transcript)
	if l.Summary != "" {
		fmt.Fprintln(w, "== the agent's summary")
		section(l.Summary)
	}
	if l.FinalMessage != "" {
		fmt.Fprintln(w, "== the agent's final message")
		section(l.FinalMessage)
	}
	if l.hasVerify {
		fmt.Fprintf(w, "== verify: %s (%s)\n", l.verifyRes, sb.Path(sandbox.VerifyFile))
		section(l.Verify)
	}
	fmt.Fprintln(w, "== audit")
	for _, ev := range l.Audit {
		fmt.Fprintf(w, "%s  %-10s %s\n", ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Event, shownLine(w, auditDetail(ev)))
	}
}

// auditDetail renders an event's data on one line for people.
func auditDetail(ev sandbox.Event) string {
	m, ok := ev.Data.(map[string]any)
	if !ok {
		return ""
	}
	switch ev.Event {
	case pipeline.EventEgress:
		return egressDetail(m)
	case sandbox.EventDecisions:
		files, _ := m["files"].(map[string]any)
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(files)) {
			fd, _ := files[p].(map[string]any)
			s := p
			if v, ok := fd["verdict"].(string); ok && v != "" {
				s += " " + v
			}
			if hs, ok := fd["hunks"].(map[string]any); ok {
				var nums []string
				for _, k := range slices.Sorted(maps.Keys(hs)) {
					if h, _ := hs[k].(map[string]any); h["verdict"] == "approve" {
						n, _ := strconv.Atoi(k)
						nums = append(nums, strconv.Itoa(n+1))
					}
				}
				s += " hunks " + strings.Join(nums, ",")
			}
			parts = append(parts, s)
		}
		if list, _ := m["host_exec_left_out"].([]any); len(list) > 0 {
			var paths []string
			for _, x := range list {
				if xm, ok := x.(map[string]any); ok {
					paths = append(paths, fmt.Sprint(xm["path"]))
				}
			}
			parts = append(parts, "left out, runs on your machine: "+strings.Join(paths, ", "))
		}
		return strings.Join(parts, "; ")
	case sandbox.EventDiskFull:
		size, _ := m["size"].(float64)
		used, _ := m["used"].(float64)
		path, _ := m["path"].(string)
		return pipeline.DiskFullMessage(sandbox.DiskUsage{Path: path, Size: int64(size), Used: int64(used)})
	case sandbox.EventSeccomp:
		calls, _ := m["syscalls"].(map[string]any)
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(calls)) {
			parts = append(parts, fmt.Sprintf("%s %v", name, calls[name]))
		}
		return fmt.Sprintf("the agent's jail refused %v calls: %s", m["denied"], strings.Join(parts, ", "))
	case sandbox.EventExcluded:
		list, _ := m["excluded"].([]any)
		var parts []string
		for _, x := range list {
			if xm, ok := x.(map[string]any); ok {
				parts = append(parts, fmt.Sprintf("%v (%v)", xm["path"], xm["reason"]))
			}
		}
		if len(parts) == 0 {
			return "nothing"
		}
		return strings.Join(parts, ", ")
	case sandbox.EventApplied:
		var parts []string
		for _, k := range []string{"applied", "merged", "conflicts", "skipped"} {
			list, _ := m[k].([]any)
			var paths []string
			for _, x := range list {
				if xm, ok := x.(map[string]any); ok {
					paths = append(paths, fmt.Sprint(xm["path"]))
				}
			}
			if len(paths) > 0 {
				parts = append(parts, k+": "+strings.Join(paths, ", "))
			}
		}
		return strings.Join(parts, "; ")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
