package egress

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

func TestCALeaf(t *testing.T) {
	ca, err := NewCA("abcd1234")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM())
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatal("CertPEM is not a PEM certificate")
	}
	if !ca.Certificate().IsCA || ca.Certificate().PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA=%v alg=%v", ca.Certificate().IsCA, ca.Certificate().PublicKeyAlgorithm)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	for _, host := range []string{"api.anthropic.com", "127.0.0.1"} {
		leaf, err := ca.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("leaf for %s does not verify: %v", host, err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: roots}); err == nil {
			t.Errorf("leaf for %s verifies for another name", host)
		}
		if _, ok := leaf.PrivateKey.(*ecdsa.PrivateKey); !ok {
			t.Errorf("leaf key is %T", leaf.PrivateKey)
		}
		again, _ := ca.Leaf(host)
		if again != leaf {
			t.Error("leaf not cached")
		}
	}
	other, _ := NewCA("other")
	leaf, _ := other.Leaf("api.anthropic.com")
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.anthropic.com", Roots: roots}); err == nil {
		t.Error("another sandbox's leaf verifies against this CA")
	}
}
