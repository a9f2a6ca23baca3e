package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/audit"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/safetext"
)

func newAuditCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check that audit logs were not rewritten, and export a sandbox's receipt",
		Long: `Every line of a sandbox's audit log is chained to the one before and
signed with this home's key (keys/audit.key); audit.head names the last
line. audit verify checks them, audit export writes a signed receipt.

What this proves: the log was written in this order by a holder of the key
and nothing was edited, deleted, moved, added or cut off the end since. What
it does not: a process of yours that can read the key can write a new chain
that verifies. Logs made before the chain read as unchained.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuditVerifyCmd(e), newAuditExportCmd(e))
	return cmd
}

func newAuditVerifyCmd(e *env) *cobra.Command {
	var receipt string
	cmd := &cobra.Command{
		Use:   "verify [ID...]",
		Short: "Check the audit logs of sandboxes (all of them and the store's, without IDs)",
		Long: `verify checks each sandbox's audit log against its signatures and its head,
and prints one line per log: ok (N lines, signed by key K), unchained (made
before the audit chain), or TAMPERED at line N with the reason. Without IDs it
checks every sandbox and the store's own log (removals). It exits non-zero
when a log does not verify.

--receipt FILE checks a receipt (audit export): its signature, that this
home's key made it, and that it matches its sandbox's log as it is now.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if receipt != "" {
				if len(args) > 0 {
					return errors.New("audit verify --receipt checks the receipt's own sandbox: give no IDs")
				}
				return runVerifyReceipt(e, receipt)
			}
			return runAuditVerify(cmd.Context(), e, args)
		},
	}
	cmd.Flags().StringVar(&receipt, "receipt", "", "check the receipt in `FILE` instead")
	return cmd
}

// auditCheck is one log's verification, as printed with --json.
type auditCheck struct {
	Log    string `json:"log"`
	Status string `json:"status"` // ok, unchained, tampered, error
	audit.Result
	// Line and Reason say where and why a tampered log is bad (Line 0:
	// its head file); Reason alone why one could not be checked.
	Line   int    `json:"line,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// checkAudit verifies one log and says how it stands.
func checkAudit(name string, verify func() (audit.Result, error)) auditCheck {
	res, err := verify()
	c := auditCheck{Log: name, Result: res}
	var ae *audit.Error
	switch {
	case errors.As(err, &ae):
		c.Status, c.Line, c.Reason = "tampered", ae.Line, ae.Reason
	case err != nil:
		c.Status, c.Reason = "error", err.Error()
	case res.Lines > 0 && res.Unchained == res.Lines:
		c.Status = "unchained"
	default:
		c.Status = "ok"
	}
	return c
}

// runAuditVerify checks the logs of the sandboxes named, or of all and
// the store's.
func runAuditVerify(ctx context.Context, e *env, ids []string) error {
	st, err := e.sandboxes()
	if err != nil {
		return err
	}
	all := len(ids) == 0
	if all {
		if ids, err = st.IDs(); err != nil {
			return err
		}
	}
	var checks []auditCheck
	for _, id := range ids {
		sb, err := st.Get(id)
		if err != nil {
			return err
		}
		checks = append(checks, checkAudit(sb.ID, sb.VerifyAudit))
	}
	if all {
		checks = append(checks, checkAudit(sandbox.StoreLog, st.VerifyAudit))
	}
	bad := 0
	for _, c := range checks {
		if c.Status == "tampered" || c.Status == "error" {
			bad++
		}
	}
	if e.json {
		if checks == nil {
			checks = []auditCheck{}
		}
		if err := e.printJSON(checks); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			fmt.Fprintf(e.stdout, "%-8s  %s\n", safetext.Line(c.Log), safetext.Line(c.text()))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d audit logs do not verify", bad, len(checks))
	}
	return nil
}

// text is the check for people; what it quotes of the file is made safe
// by the caller.
func (c auditCheck) text() string {
	switch c.Status {
	case "tampered":
		if c.Line == 0 {
			return "TAMPERED at its head (audit.head): " + c.Reason
		}
		return fmt.Sprintf("TAMPERED at line %d: %s", c.Line, c.Reason)
	case "error":
		return "cannot check: " + c.Reason
	case "unchained":
		return fmt.Sprintf("unchained (%d lines, made before the audit chain)", c.Lines)
	}
	if c.Seq == 0 {
		return "ok (empty)"
	}
	if c.Unchained > 0 {
		return fmt.Sprintf("ok (%d lines, the first %d made before the audit chain, signed by key %s)", c.Lines, c.Unchained, c.Key)
	}
	return fmt.Sprintf("ok (%d lines, signed by key %s)", c.Lines, c.Key)
}

// maxReceipt caps a receipt file read.
const maxReceipt = 16 << 20

// runVerifyReceipt checks the receipt in path against its sandbox.
func runVerifyReceipt(e *env, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read receipt: %w", err)
	}
	if len(data) > maxReceipt {
		return fmt.Errorf("read receipt %s: %d bytes, more than a receipt holds", path, len(data))
	}
	var r audit.Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("read receipt %s: not a receipt (%v)", path, err)
	}
	if !sandbox.ValidID(r.Sandbox) {
		return fmt.Errorf("receipt %s: its sandbox %s is not a sandbox ID", path, safetext.Line(fmt.Sprintf("%q", r.Sandbox)))
	}
	st, err := e.sandboxes()
	if err != nil {
		return err
	}
	sb, err := st.Get(r.Sandbox)
	if err != nil {
		return err
	}
	if err := sb.CheckReceipt(r); err != nil {
		return fmt.Errorf("receipt %s does not match: %s", path, safetext.Line(err.Error()))
	}
	id, _ := r.ID()
	if e.json {
		return e.printJSON(map[string]any{"receipt": id, "sandbox": sb.ID, "status": "ok", "audit_seq": r.AuditSeq})
	}
	fmt.Fprintf(e.stdout, "receipt %s of sandbox %s: ok (signed by this home's key %s, audit line %d is in the log as it is now)\n", id, sb.ID, r.Key, r.AuditSeq)
	return nil
}

func newAuditExportCmd(e *env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Write a sandbox's signed receipt (hashes only) to standard output or a file",
		Long: `export writes the sandbox's receipt as JSON: its ID, the SHA-256 of its
baseline manifest, the hashes of the files its applies wrote (paths hashed
too), the staged actions sent (their numbers and hashes), the verify step's
result, its audit log's head (line and hash) and this home's public key,
signed with it. It holds no content of the project. A sandbox whose audit
log does not verify has no receipt. airlock audit verify --receipt FILE
checks one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuditExport(cmd.Context(), e, args[0], out)
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the receipt to `FILE` instead of standard output")
	return cmd
}

// runAuditExport writes sandbox id's receipt to out, or standard output.
func runAuditExport(ctx context.Context, e *env, id, out string) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	r, err := sb.Receipt()
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if out == "" {
		_, err := e.stdout.Write(data)
		return err
	}
	if err := atomicfile.WriteFile(out, data, 0o600); err != nil {
		return err
	}
	rid, _ := r.ID()
	if e.json {
		return e.printJSON(map[string]any{"receipt": rid, "sandbox": sb.ID, "out": out})
	}
	fmt.Fprintf(e.stdout, "receipt %s of sandbox %s written to %s\n", rid, sb.ID, out)
	return nil
}
