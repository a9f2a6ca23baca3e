package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
)

func TestReceipt(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	r := Receipt{Sandbox: "abcd1234", Baseline: "b", Changes: []Change{{Path: "p", After: "a"}}, Verify: "passed", AuditSeq: 3, AuditHead: "h"}
	if err := r.Sign(key); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckSignature(pub); err != nil {
		t.Fatal(err)
	}
	edited := r
	edited.Verify = "failed"
	if err := edited.CheckSignature(pub); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Errorf("an edited receipt: %v", err)
	}
	otherPub, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	resigned := r
	resigned.Sign(otherKey)
	if err := resigned.CheckSignature(pub); err == nil || !strings.Contains(err.Error(), "not this home's key") {
		t.Errorf("a receipt re-signed with another key: %v", err)
	}
	if err := resigned.CheckSignature(otherPub); err != nil {
		t.Error(err)
	}
	if id, err := r.ID(); err != nil || len(id) != 16 {
		t.Errorf("ID %q, %v", id, err)
	}
}
