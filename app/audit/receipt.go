package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// Receipt says, by hashes only, what a sandbox's promotion rests on: the
// baseline it started from, what was applied, the actions sent, the
// verify step's result, and the audit log's head when it was made,
// signed with the home's key. It can go along with a commit or a pull
// request without giving away the project's content.
type Receipt struct {
	Version int    `json:"version"`
	Sandbox string `json:"sandbox"`
	// Baseline is the SHA-256 of the baseline manifest (baseline.json).
	Baseline string `json:"baseline_sha256"`
	// Changes are the files the applies wrote, before and after.
	Changes []Change `json:"changes"`
	// Actions are the staged actions sent from the host.
	Actions []Action `json:"actions_sent"`
	// Verify is the verify step's result: passed, failed or not run.
	Verify string `json:"verify"`
	// AuditSeq and AuditHead are the audit log's last line when the
	// receipt was made; AuditUnchained counts its first lines that
	// predate the chain.
	AuditSeq       int64  `json:"audit_seq"`
	AuditHead      string `json:"audit_head"`
	AuditUnchained int    `json:"audit_unchained,omitempty"`
	// PublicKey is the signing key (base64 Ed25519), Key its KeyID.
	PublicKey string `json:"public_key"`
	Key       string `json:"key"`
	Sig       string `json:"sig,omitempty"`
}

// Change is one file an apply wrote: its path's SHA-256 and its
// content's SHA-256 before and after ("" where it did not exist).
type Change struct {
	Path   string `json:"path_sha256"`
	Before string `json:"before_sha256,omitempty"`
	After  string `json:"after_sha256,omitempty"`
}

// Action is one staged action sent: its number and the SHA-256 of the
// held request as stored.
type Action struct {
	ID     int    `json:"id"`
	SHA256 string `json:"sha256"`
}

// ReceiptVersion is the Version of receipts this Airlock makes.
const ReceiptVersion = 1

// Sign fills in the receipt's key and signature: Ed25519 over its
// canonical JSON without sig.
func (r *Receipt) Sign(key ed25519.PrivateKey) error {
	pub := key.Public().(ed25519.PublicKey)
	r.Version, r.PublicKey, r.Key, r.Sig = ReceiptVersion, base64.StdEncoding.EncodeToString(pub), KeyID(pub), ""
	canon, err := canonical(r)
	if err != nil {
		return fmt.Errorf("sign receipt: %w", err)
	}
	r.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, canon))
	return nil
}

// CheckSignature verifies the receipt's signature with the key it names,
// and that the key is want (the home's); it says nothing of whether the
// receipt matches a log (that is the caller's, with HashAt).
func (r Receipt) CheckSignature(want ed25519.PublicKey) error {
	pub, err := base64.StdEncoding.DecodeString(r.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return errors.New("receipt: its public key is not an Ed25519 key")
	}
	if r.Version != ReceiptVersion {
		return fmt.Errorf("receipt: version %d, this Airlock reads %d", r.Version, ReceiptVersion)
	}
	if r.Key != KeyID(pub) {
		return errors.New("receipt: its key id is not its public key's")
	}
	sig, err := base64.StdEncoding.DecodeString(r.Sig)
	r.Sig = ""
	canon, cerr := canonical(r)
	if err != nil || cerr != nil || !ed25519.Verify(pub, canon, sig) {
		return errors.New("receipt: bad signature: it was edited after it was signed")
	}
	if want == nil || !want.Equal(ed25519.PublicKey(pub)) {
		return fmt.Errorf("receipt: signed by key %s, not this home's key", r.Key)
	}
	return nil
}

// ID is a short name of a signed receipt: the first 16 hex digits of the
// SHA-256 of its canonical JSON.
func (r Receipt) ID() (string, error) {
	canon, err := canonical(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:8]), nil
}
