//go:build !darwin

package egress

// keychain: only macOS has one Airlock reads.
func keychain(string) (string, bool) { return "", false }

func keychainHint(string) string { return "" }

func keychainShort() string { return "" }
