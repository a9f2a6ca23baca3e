package egress

import "fmt"

// Store says where a secret's value was found.
type Store string

const (
	StoreKeychain Store = "keychain"    // the macOS Keychain (service "airlock", account NAME)
	StoreConfig   Store = "config"      // [secrets] of the user configuration
	StoreEnv      Store = "environment" // the airlock process's environment
)

// LookupSecret finds the value of the secret name on the host: the macOS
// Keychain (service "airlock", account name), then configured (the user
// configuration's [secrets]), then getenv. It never looks in a project.
func LookupSecret(name string, configured map[string]string, getenv func(string) string) (string, Store, error) {
	if v, ok := keychain(name); ok {
		return v, StoreKeychain, nil
	}
	if v := configured[name]; v != "" {
		return v, StoreConfig, nil
	}
	if getenv != nil {
		if v := getenv(name); v != "" {
			return v, StoreEnv, nil
		}
	}
	return "", "", fmt.Errorf("secret %s not found: set it %s", name, WhereToSet(name))
}

// WhereToSet says, for people, where airlock looks secret name up: "in
// the environment of airlock, or under [secrets] …".
func WhereToSet(name string) string {
	return fmt.Sprintf("in the environment of airlock, or under [secrets] in the user configuration (%s = \"...\" in ~/.config/airlock/config.toml)%s", name, keychainHint(name))
}

// Stores says in a few words where airlock looks secrets up, for a
// line in a window: "in the Keychain (service airlock), under [secrets]
// in config.toml, or in airlock's environment".
func Stores() string {
	return keychainShort() + "under [secrets] in config.toml, or in airlock's environment"
}
