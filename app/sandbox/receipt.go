package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/airlock-dev/airlock/app/audit"
)

// VerifyWord is the verify step's result in one word, for a trailer or a
// receipt: passed, failed, or not run.
func (m Meta) VerifyWord() string {
	switch {
	case m.Verify == nil || m.Verify.Error != "":
		return "not run"
	case m.Verify.Passed:
		return "passed"
	}
	return "failed"
}

// Receipt is the sandbox's receipt as of now, signed with the home's key
// (audit.Receipt): the baseline manifest's hash, the files its applies
// wrote, the actions sent, the verify step's result and its audit log's
// head. A sandbox whose audit log does not verify has none.
func (sb *Sandbox) Receipt() (audit.Receipt, error) {
	res, err := sb.VerifyAudit()
	if err != nil {
		return audit.Receipt{}, fmt.Errorf("receipt of %s: its audit log does not verify (airlock audit verify %s): %w", sb.ID, sb.ID, err)
	}
	r, err := sb.receiptFacts()
	if err != nil {
		return r, fmt.Errorf("receipt of %s: %w", sb.ID, err)
	}
	r.AuditSeq, r.AuditHead, r.AuditUnchained = res.Seq, res.Head, res.Unchained
	key, err := sb.store.Keys().Signer()
	if err != nil {
		return r, err
	}
	return r, r.Sign(key)
}

// receiptFacts is what a receipt says of the sandbox, unsigned.
func (sb *Sandbox) receiptFacts() (audit.Receipt, error) {
	m, err := sb.Meta()
	if err != nil {
		return audit.Receipt{}, err
	}
	r := audit.Receipt{Sandbox: sb.ID, Verify: m.VerifyWord(), Changes: []audit.Change{}, Actions: []audit.Action{}}
	if r.Baseline, err = fileSHA256(sb.Path(BaselineFile)); err != nil {
		return r, err
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		return r, err
	}
	for _, ev := range evs {
		d, _ := ev.Data.(map[string]any)
		if ev.Event != EventApplied || d["held"] == true {
			continue
		}
		for _, k := range []string{"applied", "merged", "resolved"} {
			list, _ := d[k].([]any)
			for _, x := range list {
				f, _ := x.(map[string]any)
				p, _ := f["path"].(string)
				before, _ := f["before_sha256"].(string)
				after, _ := f["after_sha256"].(string)
				sum := sha256.Sum256([]byte(p))
				r.Changes = append(r.Changes, audit.Change{Path: hex.EncodeToString(sum[:]), Before: before, After: after})
			}
		}
	}
	journal, err := sb.SendJournal()
	if err != nil {
		return r, err
	}
	ids := slices.Sorted(func(yield func(int) bool) {
		for id, rec := range journal {
			if rec.State != NotSent && !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		sum, err := fileSHA256(filepath.Join(sb.Path(ActionsDir), actionFile(id)))
		if err != nil {
			return r, err
		}
		r.Actions = append(r.Actions, audit.Action{ID: id, SHA256: sum})
	}
	return r, nil
}

// CheckReceipt checks a receipt against the sandbox as it is now: signed
// with the home's key, of this sandbox, its baseline, and its audit head
// a line of the sandbox's log, which verifies (the log may have grown
// since).
func (sb *Sandbox) CheckReceipt(r audit.Receipt) error {
	pub, err := sb.store.Keys().Public()
	if err != nil {
		return err
	}
	if err := r.CheckSignature(pub); err != nil {
		return err
	}
	if r.Sandbox != sb.ID {
		return fmt.Errorf("receipt: it is of sandbox %q, not %s", r.Sandbox, sb.ID)
	}
	res, err := sb.VerifyAudit()
	if err != nil {
		return fmt.Errorf("receipt: the sandbox's audit log does not verify: %w", err)
	}
	if h, ok := res.HashAt(r.AuditSeq); r.AuditSeq > 0 && (!ok || h != r.AuditHead) {
		return fmt.Errorf("receipt: its audit line %d is not in the sandbox's log as it is now (%d lines)", r.AuditSeq, res.Lines)
	}
	facts, err := sb.receiptFacts()
	if err != nil {
		return err
	}
	if facts.Baseline != r.Baseline {
		return errors.New("receipt: its baseline is not the sandbox's")
	}
	return nil
}

// fileSHA256 is the hex SHA-256 of a file's content, "" when it does not
// exist.
func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
