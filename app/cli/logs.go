package cli

import (
	"bytes"
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
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if auditOnly {
				raw, err := sb.AuditRaw()
				if err != nil {
					return err
				}
				// As stored; on a terminal, the paths and messages it holds
				// from the guest are shown safely.
				_, err = io.WriteString(e.stdout, shown(e.stdout, string(raw)))
				return err
			}
			transcript, err := sb.Transcript()
			if err != nil {
				return err
			}
			summary, err := sb.Summary()
			if err != nil {
				return err
			}
			events, err := sb.ReadAudit()
			if err != nil {
				return err
			}
			verifyLog, err := sb.VerifyLog()
			if err != nil {
				return err
			}
			final, err := sb.FinalMessage()
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"sandbox": sb.ID, "transcript": string(transcript), "summary": summary, "final_message": final, "verify": string(verifyLog), "audit": events})
			}
			// Everything below but the headings came from the guest: on a
			// terminal it is shown safely (the transcript's own control
			// sequences as visible escapes, not replayed), else as it is.
			w := e.stdout
			fmt.Fprintf(w, "== transcript (%s)\n", sb.Path(sandbox.TranscriptFile))
			io.WriteString(w, shown(w, string(transcript)))
			if len(transcript) > 0 && !bytes.HasSuffix(transcript, []byte("\n")) {
				fmt.Fprintln(w)
			}
			if summary != "" {
				fmt.Fprintln(w, "== the agent's summary")
				fmt.Fprint(w, shown(w, summary))
				if !strings.HasSuffix(summary, "\n") {
					fmt.Fprintln(w)
				}
			}
			if final != "" {
				fmt.Fprintln(w, "== the agent's final message")
				fmt.Fprint(w, shown(w, final))
				if !strings.HasSuffix(final, "\n") {
					fmt.Fprintln(w)
				}
			}
			if verifyLog != nil {
				m, _ := sb.Meta()
				fmt.Fprintf(w, "== verify: %s (%s)\n", m.Verify.String(), sb.Path(sandbox.VerifyFile))
				io.WriteString(w, shown(w, string(verifyLog)))
				if len(verifyLog) > 0 && !bytes.HasSuffix(verifyLog, []byte("\n")) {
					fmt.Fprintln(w)
				}
			}
			fmt.Fprintln(w, "== audit")
			for _, ev := range events {
				fmt.Fprintf(w, "%s  %-10s %s\n", ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Event, shownLine(w, auditDetail(ev)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&auditOnly, "audit", false, "print only the audit log, as JSON lines")
	return cmd
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
