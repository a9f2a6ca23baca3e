package feature

import (
	"slices"
	"strings"
)

// official is where the Dev Container project publishes its features.
const official = "ghcr.io/devcontainers/features/"

// githubReleases are the hosts a download from a GitHub release (or a
// git ls-remote of a repository's tags, which the official install
// scripts use to find versions) lands on.
var githubReleases = []string{"github.com", "api.github.com", "objects.githubusercontent.com", "release-assets.githubusercontent.com", "codeload.github.com"}

// keyservers are the OpenPGP key servers the official scripts fetch
// signing keys from.
var keyservers = []string{"keyserver.ubuntu.com", "keyserver.ubuntu.com:11371", "keys.openpgp.org", "keyserver.pgp.com", "keyserver.pgp.com:11371"}

// officialHosts are the hosts each official feature's install.sh
// reaches besides Debian's mirror (@debian), read from the scripts of
// github.com/devcontainers/features: they are allowed for the build that
// installs it, and named when the environment is confirmed.
var officialHosts = map[string][]string{
	// nvm from its repository, Node.js from nodejs.org (nvm's mirror),
	// yarn and pnpm from npm's registry.
	"node": append([]string{"raw.githubusercontent.com", "nodejs.org", "@npm", "dl.yarnpkg.com"}, githubReleases...),
	// CPython's sources from python.org (and OpenSSL's from GitHub),
	// verified by keys from the key servers; pip's tools from PyPI.
	"python": append(append([]string{"www.python.org", "@pypi"}, githubReleases...), keyservers...),
	// Go's release list from go.googlesource.com, the toolchain from
	// golang.org/dl (redirected to go.dev and dl.google.com),
	// golangci-lint's installer, the go tools from the module proxy.
	"go": append([]string{"go.googlesource.com", "golang.org", "go.dev", "dl.google.com", "golangci-lint.run", "raw.githubusercontent.com", "@go", "storage.googleapis.com"}, githubReleases...),
	// Oh My Zsh, cloned from GitHub.
	"common-utils": githubReleases,
	// git built from its sources on GitHub, or Ubuntu's PPA.
	"git": append(append([]string{"ppa.launchpad.net"}, githubReleases...), keyservers...),
	// gh from its own apt repository, keys from the key servers.
	"github-cli": append(append([]string{"cli.github.com"}, githubReleases...), keyservers...),
	// OpenSSH's server from Debian's packages: nothing more.
	"sshd": nil,
	// Microsoft's apt repository, else pipx from PyPI; extensions from
	// GitHub.
	"azure-cli": append([]string{"packages.microsoft.com", "aka.ms", "@pypi"}, githubReleases...),
	// SDKMAN! and the JDKs it brokers (Adoptium's API, GitHub's
	// releases), Maven and Gradle from their own hosts.
	"java": append([]string{"get.sdkman.io", "api.sdkman.io", "broker.sdkman.io", "api.adoptium.net", "services.gradle.org", "downloads.gradle.org",
		"archive.apache.org", "dlcdn.apache.org", "repo.maven.apache.org"}, githubReleases...),
	// dotnet-install.sh and the SDKs it fetches.
	"dotnet": append([]string{"dot.net", "aka.ms", "builds.dotnet.microsoft.com", "dotnetcli.azureedge.net", "dotnetcli.blob.core.windows.net",
		"ci.dot.net", "dotnet.microsoft.com"}, githubReleases...),
	// rustup and the toolchains from static.rust-lang.org; crates for
	// the components it adds.
	"rust": append([]string{"static.rust-lang.org", "sh.rustup.rs", "@crates"}, githubReleases...),
	// A desktop from Debian's packages, noVNC from GitHub.
	"desktop-lite": githubReleases,
	// Terraform, tflint, terragrunt from HashiCorp and GitHub, verified
	// by keys from the key servers and Keybase.
	"terraform": append(append([]string{"releases.hashicorp.com", "raw.githubusercontent.com", "keybase.io"}, githubReleases...), keyservers...),
	// kubectl from dl.k8s.io, helm from get.helm.sh, minikube from
	// Google's storage.
	"kubectl-helm-minikube": append(append([]string{"dl.k8s.io", "cdn.dl.k8s.io", "get.helm.sh", "storage.googleapis.com", "raw.githubusercontent.com"},
		githubReleases...), keyservers...),
}

// Hosts are the hosts Airlock knows a feature's install reaches beyond
// @debian (nil for a feature it does not know: the user names those
// hosts), and whether it knows them.
func Hosts(ref string) ([]string, bool) {
	name, ok := strings.CutPrefix(BaseRef(ref), official)
	if !ok {
		return nil, false
	}
	h, ok := officialHosts[name]
	return slices.Clone(h), ok
}
