package egress

import (
	"os/exec"
	"strings"
)

// keychain reads a generic password of service "airlock" and account
// name from the user's login keychain.
func keychain(name string) (string, bool) {
	out, err := exec.Command("security", "find-generic-password", "-s", "airlock", "-a", name, "-w").Output()
	if err != nil {
		return "", false
	}
	v := strings.TrimRight(string(out), "\n")
	return v, v != ""
}

func keychainHint(name string) string {
	return ", or in the Keychain: security add-generic-password -s airlock -a " + name + " -w"
}

func keychainShort() string { return "in the Keychain (service airlock), " }
