package manifest

import (
	"bytes"
	"io"
	"path"
	"strings"
)

// The secret deny-list: files that commonly hold credentials. They never
// enter a manifest made by Walk, whatever .gitignore or airlock.toml say,
// and every one is reported. Names are matched on the last path element,
// at any depth, ignoring case: macOS file systems are case-insensitive by
// default, so .ENV, deploy.PEM and ID_RSA are the same secrets to the
// tools that read them.
//
//   - environment files: .env, .env.* (except the templates .env.example,
//     .env.sample, .env.template, .env.dist, which projects commit on
//     purpose and agents need), .envrc (direnv)
//   - private keys and key stores: *.pem, *.key, *.p12, *.pfx, *.keystore,
//     *.jks, *.ppk, *.kdbx, *.keychain, *.keychain-db, and SSH private keys
//     id_rsa, id_dsa, id_ecdsa, id_ed25519, id_ecdsa_sk, id_ed25519_sk with
//     any suffix (id_rsa.old, id_ed25519_work) except ".pub"
//   - credential directories: .aws/, .ssh/, .gnupg/, .azure/, gcloud's
//     .config/gcloud/
//   - credential files: .netrc, _netrc, .pypirc, .git-credentials, .pgpass,
//     .vault-token, .htpasswd, credentials.json,
//     application_default_credentials.json, service-account.json,
//     .docker/config.json, .kube/config, terraform state *.tfstate and
//     *.tfstate.backup, credentials.tfrc.json
//   - package manager configs only when they hold a token: .npmrc with
//     _authToken, _auth or _password; .yarnrc.yml with npmAuthToken
//
// Public keys (*.pub), certificates in .crt/.cer form and terraform
// variables are not on the list: they are rarely secret and often needed.

// secretRule is one deny-list entry.
type secretRule struct {
	what  string // for reports: "private key (*.pem)"
	match func(rel, name string, isDir bool) bool
	// tokens, when set, makes the rule apply only to regular files whose
	// content contains one of these strings.
	tokens []string
}

var envTemplates = map[string]bool{
	".env.example": true, ".env.sample": true, ".env.template": true, ".env.dist": true,
}

func nameIs(names ...string) func(rel, name string, isDir bool) bool {
	return func(_, name string, _ bool) bool {
		for _, n := range names {
			if name == n {
				return true
			}
		}
		return false
	}
}

func suffixIs(sfx ...string) func(rel, name string, isDir bool) bool {
	return func(_, name string, _ bool) bool {
		for _, s := range sfx {
			if strings.HasSuffix(name, s) && len(name) > len(s) {
				return true
			}
		}
		return false
	}
}

// under matches name directly inside a directory called dir (at any depth).
func under(dir, name string) func(rel, name string, isDir bool) bool {
	return func(rel, n string, _ bool) bool {
		return n == name && path.Base(path.Dir(rel)) == dir
	}
}

func sshKey(_, name string, _ bool) bool {
	if strings.HasSuffix(name, ".pub") {
		return false
	}
	for _, k := range []string{"id_ed25519_sk", "id_ecdsa_sk", "id_ed25519", "id_ecdsa", "id_rsa", "id_dsa"} {
		if name == k {
			return true
		}
		if rest, ok := strings.CutPrefix(name, k); ok && strings.ContainsAny(rest[:1], "._-") {
			return true
		}
	}
	return false
}

// secretRules is read-only after initialisation.
var secretRules = []secretRule{
	{what: "environment file (.env, .env.*)", match: func(_, name string, _ bool) bool {
		return name == ".env" || (strings.HasPrefix(name, ".env.") && !envTemplates[name])
	}},
	{what: "direnv file (.envrc)", match: nameIs(".envrc")},
	{what: "private key or certificate bundle (*.pem, *.key, *.p12, *.pfx, *.ppk)", match: suffixIs(".pem", ".key", ".p12", ".pfx", ".ppk")},
	{what: "key store (*.keystore, *.jks, *.kdbx, *.keychain)", match: suffixIs(".keystore", ".jks", ".kdbx", ".keychain", ".keychain-db")},
	{what: "SSH private key (id_rsa, id_ed25519, …)", match: sshKey},
	{what: "credential directory (.aws, .ssh, .gnupg, .azure)", match: nameIs(".aws", ".ssh", ".gnupg", ".azure")},
	{what: "gcloud credentials (.config/gcloud)", match: under(".config", "gcloud")},
	{what: "credential file (.netrc, .pypirc, .git-credentials, .pgpass, .vault-token, .htpasswd)",
		match: nameIs(".netrc", "_netrc", ".pypirc", ".git-credentials", ".pgpass", ".vault-token", ".htpasswd")},
	{what: "cloud credentials (credentials.json, application_default_credentials.json, service-account.json)",
		match: nameIs("credentials.json", "application_default_credentials.json", "service-account.json", "service_account.json")},
	{what: "docker credentials (.docker/config.json)", match: under(".docker", "config.json")},
	{what: "kubernetes credentials (.kube/config)", match: under(".kube", "config")},
	{what: "terraform state or credentials (*.tfstate, credentials.tfrc.json)", match: func(_, name string, _ bool) bool {
		return strings.HasSuffix(name, ".tfstate") || strings.HasSuffix(name, ".tfstate.backup") || name == "credentials.tfrc.json"
	}},
	{what: ".npmrc holding an auth token", match: nameIs(".npmrc"), tokens: []string{"_authToken", "_auth", "_password"}},
	{what: ".yarnrc.yml holding an auth token", match: nameIs(".yarnrc.yml"), tokens: []string{"npmAuthToken"}},
}

// maxTokenScan bounds how much of a file a content rule reads.
const maxTokenScan = 1 << 20

// secretRuleFor returns the deny-list rule matching rel, or nil. Every
// rule is written in lower case and sees rel lowered, so case never gets
// a secret past the list. open is called only for rules that look at
// content (and only for regular files); a file that cannot be read is
// treated as holding a token.
func secretRuleFor(rel string, isDir, isRegular bool, open func() (io.ReadCloser, error)) *secretRule {
	rel = strings.ToLower(rel)
	name := path.Base(rel)
	for i := range secretRules {
		r := &secretRules[i]
		if !r.match(rel, name, isDir) {
			continue
		}
		if len(r.tokens) == 0 {
			return r
		}
		if !isRegular {
			continue
		}
		if containsToken(open, r.tokens) {
			return r
		}
	}
	return nil
}

func containsToken(open func() (io.ReadCloser, error), tokens []string) bool {
	f, err := open()
	if err != nil {
		return true
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenScan))
	if err != nil {
		return true
	}
	for _, t := range tokens {
		if bytes.Contains(data, []byte(t)) {
			return true
		}
	}
	return false
}
