package egress

import (
	"fmt"
	"slices"
	"strings"
)

// Registry is a package registry whose hosts are allowed together by
// naming it, "@npm", wherever a host pattern is accepted (ParseRules).
type Registry struct {
	// Name is what follows the "@".
	Name string
	// Description says which clients it serves, for people.
	Description string
	// Hosts are the hosts its clients reach, each with its port; Port 0
	// is the default of the kind of request (443 over TLS, 80 for plain
	// HTTP), for registries whose clients use both.
	Hosts []Rule
}

// ReadMethods are a registry preset's methods when none are given: what
// downloading needs (publishing needs a rule of its own).
var ReadMethods = []string{"GET", "HEAD"}

// registries is every registry preset, in the order they are listed.
// Each host says which client reaches it for what: the guest's clients
// follow redirects themselves, so every host they land on is listed.
var registries = []Registry{
	{Name: "npm", Description: "npm, yarn, pnpm and bun (the public npm registry)", Hosts: []Rule{
		// npm, pnpm and bun: package documents and tarballs
		// (/<name>/-/<name>-<version>.tgz) both come from here.
		{Host: "registry.npmjs.org", Port: 443},
		// yarn (classic and berry) has its own name for the same
		// registry, and lockfiles written by yarn name it.
		{Host: "registry.yarnpkg.com", Port: 443},
	}},
	{Name: "pypi", Description: "pip, uv, poetry and pipenv (the Python Package Index)", Hosts: []Rule{
		// The simple and JSON indexes (/simple/<name>/, /pypi/<name>/json).
		{Host: "pypi.org", Port: 443},
		// Wheels and sdists: every file link of the index points here.
		{Host: "files.pythonhosted.org", Port: 443},
	}},
	{Name: "go", Description: "the go command's module proxy and checksum database (GOPROXY, GOSUMDB defaults)", Hosts: []Rule{
		// GOPROXY=https://proxy.golang.org: /@v/list, .info, .mod and
		// .zip, all served by the proxy itself (no redirect to storage).
		{Host: "proxy.golang.org", Port: 443},
		// GOSUMDB=sum.golang.org: /lookup and /tile, to verify go.sum.
		{Host: "sum.golang.org", Port: 443},
	}},
	{Name: "crates", Description: "cargo (crates.io)", Hosts: []Rule{
		// The sparse index (cargo ≥ 1.70's default): config.json and one
		// file per crate.
		{Host: "index.crates.io", Port: 443},
		// Crate downloads: the "dl" of the index's config.json.
		{Host: "static.crates.io", Port: 443},
		// The web API: cargo search, cargo info, and the download
		// endpoint older cargos use (a redirect to static.crates.io).
		{Host: "crates.io", Port: 443},
	}},
	{Name: "rubygems", Description: "gem and bundler (rubygems.org)", Hosts: []Rule{
		// gem install: the compact index's fallback, specs and the .gem
		// files (/gems/<name>-<version>.gem, served by its CDN under
		// this name).
		{Host: "rubygems.org", Port: 443},
		// bundler and gem ≥ 3.x: the compact index (/versions,
		// /info/<name>).
		{Host: "index.rubygems.org", Port: 443},
	}},
	{Name: "maven", Description: "Maven, Gradle, sbt and Coursier (Maven Central)", Hosts: []Rule{
		// Maven's and Gradle's mavenCentral() URL.
		{Host: "repo.maven.apache.org", Port: 443},
		// The same repository under its older name, still the default
		// of sbt, Coursier, Ivy and many builds' explicit settings.
		{Host: "repo1.maven.org", Port: 443},
	}},
	{Name: "debian", Description: "apt on Debian (the default mirror and security updates)", Hosts: []Rule{
		// sources.list's and debian.sources' default mirror; apt uses
		// plain HTTP unless the URL says https, so both ports.
		{Host: "deb.debian.org"},
		// Security updates: bookworm and later name
		// deb.debian.org/debian-security, older releases this host.
		{Host: "security.debian.org"},
	}},
	{Name: "docker", Description: "Docker Hub, for Docker inside the VM (docker pull, docker compose pull, a Dockerfile's FROM)", Hosts: []Rule{
		// The registry API (/v2/…): manifests, and blobs by redirect.
		{Host: "registry-1.docker.io", Port: 443},
		// Bearer tokens for pulls (/token?service=registry.docker.io).
		{Host: "auth.docker.io", Port: 443},
		// Where blob requests are redirected: Docker's CDNs, and the
		// storage anonymous and personal accounts are sent to.
		{Host: "production.cloudflare.docker.com", Port: 443},
		{Host: "production.cloudfront.docker.com", Port: 443},
		{Host: "docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com", Port: 443},
	}},
	{Name: "ghcr", Description: "the GitHub Container Registry, for Docker inside the VM (ghcr.io/… images)", Hosts: []Rule{
		// The registry API and its tokens (/token).
		{Host: "ghcr.io", Port: 443},
		// Where blob requests are redirected.
		{Host: "pkg-containers.githubusercontent.com", Port: 443},
	}},
	{Name: "mcr", Description: "the Microsoft Container Registry, for Docker inside the VM (mcr.microsoft.com/… images: the Dev Container images)", Hosts: []Rule{
		// The registry API (/v2/…): manifests, and blobs by redirect.
		{Host: "mcr.microsoft.com", Port: 443},
		// Where blob requests are redirected: a region's data endpoint
		// (eastus.data.mcr.microsoft.com, …).
		{Host: "*.data.mcr.microsoft.com", Port: 443},
	}},
}

// Registries returns every registry preset, in order.
func Registries() []Registry {
	out := make([]Registry, len(registries))
	for i, r := range registries {
		r.Hosts = slices.Clone(r.Hosts)
		out[i] = r
	}
	return out
}

// RegistryNames lists the presets as they are written: "@npm, @pypi, …".
func RegistryNames() string {
	names := make([]string, len(registries))
	for i, r := range registries {
		names[i] = "@" + r.Name
	}
	return strings.Join(names, ", ")
}

// LookupRegistry returns the registry preset called name (without "@").
func LookupRegistry(name string) (Registry, bool) {
	for _, r := range Registries() {
		if r.Name == name {
			return r, true
		}
	}
	return Registry{}, false
}

// Rules returns the registry's hosts as rules allowing methods
// (ReadMethods if none), each with Registry set.
func (g Registry) Rules(methods []string) []Rule {
	if len(methods) == 0 {
		methods = ReadMethods
	}
	out := make([]Rule, len(g.Hosts))
	for i, h := range g.Hosts {
		out[i] = Rule{Host: h.Host, Port: h.Port, Methods: slices.Clone(methods), Registry: g.Name}
	}
	return out
}

// ParseRules parses one entry of an allow or deny list: a rule
// (ParseRule), or a registry preset, "@NAME" or "@NAME (METHODS)", which
// stands for the registry's hosts with those methods, GET and HEAD if
// none are given.
func ParseRules(s string) ([]Rule, error) {
	t := strings.TrimSpace(s)
	name, ok := strings.CutPrefix(t, "@")
	if !ok {
		r, err := ParseRule(t)
		if err != nil {
			return nil, err
		}
		return []Rule{r}, nil
	}
	name, methods, err := cutMethods(name)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	g, ok := LookupRegistry(strings.ToLower(name))
	if !ok {
		return nil, fmt.Errorf("%q: no registry preset @%s; the presets are %s", s, name, RegistryNames())
	}
	return g.Rules(methods), nil
}
