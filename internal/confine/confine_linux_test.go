package confine

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childEnv makes the test binary a confined child: it confines itself to
// what the variable names and tries what the rules allow and deny.
const childEnv = "AIRLOCK_CONFINE_TEST_CHILD"

func TestMain(m *testing.M) {
	if dirs := os.Getenv(childEnv); dirs != "" {
		os.Exit(child(strings.Split(dirs, "|")))
	}
	os.Exit(m.Run())
}

// child is confined to allowed (read-write) and the system's programs;
// secret is outside. It prints one line per attempt.
func child(dirs []string) int {
	allowed, secret, listener := dirs[0], dirs[1], dirs[2]
	if _, err := Process(Rules{Read: []string{"/usr", "/lib", "/lib64", "/bin", "/etc"}, Write: []string{allowed}, Devices: []string{"/dev/null"}, NoTCP: true}); err != nil {
		fmt.Println("confine:", err)
		return 1
	}
	try := func(what string, err error) {
		if err != nil {
			fmt.Printf("%s: denied (%v)\n", what, err)
		} else {
			fmt.Printf("%s: allowed\n", what)
		}
	}
	_, err := os.ReadFile(filepath.Join(allowed, "mine"))
	try("read allowed", err)
	try("write allowed", os.WriteFile(filepath.Join(allowed, "new"), []byte("x"), 0o600))
	_, err = os.ReadFile(filepath.Join(secret, "key"))
	try("read secret", err)
	try("write secret", os.WriteFile(filepath.Join(secret, "planted"), []byte("x"), 0o600))
	_, err = os.ReadDir(secret)
	try("list secret", err)
	try("remove secret", os.Remove(filepath.Join(secret, "key")))
	// A process started afterwards is confined as well.
	try("child read secret", exec.Command("cat", filepath.Join(secret, "key")).Run())
	c, err := net.Dial("tcp", listener)
	if err == nil {
		c.Close()
	}
	try("tcp connect", err)
	return 0
}

func TestProcess(t *testing.T) {
	// Process confines its caller for good: the tries run in a child.
	allowed, secret := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(allowed, "mine"), []byte("ok"), 0o600)
	os.WriteFile(filepath.Join(secret, "key"), []byte("ssh key"), 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+allowed+"|"+secret+"|"+l.Addr().String())
	out, err := cmd.CombinedOutput()
	t.Logf("confined child:\n%s", out)
	if err != nil {
		if strings.Contains(string(out), ErrUnavailable.Error()) {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI's kernel has Landlock: %s", out)
			}
			t.Skipf("this kernel cannot confine: %s", out)
		}
		t.Fatalf("child: %v", err)
	}
	want := map[string]string{
		"read allowed": "allowed", "write allowed": "allowed",
		"read secret": "denied", "write secret": "denied", "list secret": "denied", "remove secret": "denied",
		"child read secret": "denied", "tcp connect": "denied",
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		what, verdict, ok := strings.Cut(line, ": ")
		if ok {
			got[what], _, _ = strings.Cut(verdict, " ")
		}
	}
	for what, v := range want {
		if got[what] != v {
			t.Errorf("%s: %q, want %s", what, got[what], v)
		}
	}
	if b, err := os.ReadFile(filepath.Join(secret, "key")); err != nil || string(b) != "ssh key" {
		t.Errorf("the secret was touched: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(secret, "planted")); err == nil {
		t.Error("a file was planted outside the rules")
	}
}
