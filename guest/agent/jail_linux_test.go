package agent

import (
	"testing"

	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
)

// A kernel's seccomp audit record of an errno gives its syscall by
// name; other records, and other actions, give nothing.
func TestDenial(t *testing.T) {
	info, err := seccomparch.GetInfo("amd64")
	if err != nil {
		t.Fatal(err)
	}
	rec := `5,452,1844004,-;audit: type=1326 audit(1796168972.392:2): auid=4294967295 uid=0 gid=0 ses=4294967295 subj=unconfined pid=98 comm="init" exe="/init" sig=0 arch=c000003e syscall=41 compat=0 ip=0x40a90e code=0x50000`
	for _, tt := range []struct {
		rec, want string
		ok        bool
	}{
		{rec, "socket", true},
		{"6,1,2,-;audit: type=1326 x syscall=99999 compat=0 code=0x50000", "syscall 99999", true},
		{"6,1,2,-;audit: type=1326 x syscall=41 compat=0 code=0x7ffc0000", "", false}, // a log action, not a denial
		{"6,1,2,-;virtio_net: type=1326 syscall=41", "", false},
		{"6,1,2,-;audit: type=1326 code=0x50000 syscall=x1", "", false},
	} {
		got, ok := denial(tt.rec, info.SyscallNumbers)
		if got != tt.want || ok != tt.ok {
			t.Errorf("denial(%q) = %q, %v; want %q, %v", tt.rec, got, ok, tt.want, tt.ok)
		}
	}
}

// The jail's filter assembles for the guest's architectures.
func TestJailFilter(t *testing.T) {
	f := jailFilter()
	if _, err := f.Policy.Assemble(); err != nil {
		t.Fatalf("the jail's seccomp policy: %v", err)
	}
}
