// Command airlock-bundle does the parts of building Airlock.app that need no
// Mac: it draws the icon into assets/, renders Info.plist, and lays out or
// assembles the bundle. packaging/build-macos.sh calls it between the cgo
// builds and codesign.
//
//	airlock-bundle icon [-out assets]
//	airlock-bundle plist [-version V]
//	airlock-bundle [-dry-run] -binary BIN -images-home HOME -out DIR [-version V]
//
// With -dry-run it prints the bundle's layout and writes nothing; the
// binary, icon and images need not exist.
//
// Like package packaging, it must not import app, guest, sync, review, fyne
// or vz.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/packaging"
	"github.com/airlock-dev/airlock/vm"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "airlock-bundle:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "icon":
			return runIcon(args[1:], stdout)
		case "plist":
			return runPlist(args[1:], stdout)
		}
	}
	return runBundle(args, stdout)
}

func runIcon(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("icon", flag.ContinueOnError)
	out := fs.String("out", "assets", "folder to write Airlock.png (1024 px) and Airlock.icns into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	png, err := packaging.IconPNG(1024)
	if err != nil {
		return err
	}
	icns, err := packaging.IconICNS()
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"Airlock.png": png, packaging.IconFileName: icns} {
		p := filepath.Join(*out, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("write icon: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", p, len(b))
	}
	return nil
}

func runPlist(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plist", flag.ContinueOnError)
	version := fs.String("version", "dev", "the build's version (git describe)")
	tmpl := fs.String("template", "Info.plist.tmpl", "the Info.plist template")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := os.ReadFile(*tmpl)
	if err != nil {
		return fmt.Errorf("read template: %w", err)
	}
	b, err := packaging.RenderInfoPlist(string(t), packaging.DefaultInfo(*version))
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

func runBundle(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("airlock-bundle", flag.ContinueOnError)
	var (
		dryRun  = fs.Bool("dry-run", false, "print the layout, write nothing")
		version = fs.String("version", "dev", "the build's version (git describe)")
		tmpl    = fs.String("template", "Info.plist.tmpl", "the Info.plist template")
		binary  = fs.String("binary", "bin/airlock", "the (universal) airlock binary")
		icon    = fs.String("icon", filepath.Join("assets", packaging.IconFileName), "the .icns icon")
		home    = fs.String("images-home", "", "an Airlock home whose images/ holds the images to ship")
		images  = fs.String("images", "minimal/arm64,minimal/amd64", "images to ship, NAME/ARCH, comma-separated; empty for none")
		out     = fs.String("out", "dist", "folder to create Airlock.app in")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	t, err := os.ReadFile(*tmpl)
	if err != nil {
		return fmt.Errorf("read template: %w", err)
	}
	refs, err := parseImages(*images)
	if err != nil {
		return err
	}
	b := packaging.Bundle{
		Info:         packaging.DefaultInfo(*version),
		InfoTemplate: string(t),
		Binary:       *binary,
		Icon:         *icon,
		ImagesHome:   *home,
		Images:       refs,
	}
	if len(refs) > 0 && *home == "" {
		if !*dryRun {
			return errors.New("-images-home is required to ship images (an Airlock home where `airlock image build` put them)")
		}
		b.ImagesHome = "$AIRLOCK_HOME"
	}
	entries, err := b.Layout()
	if err != nil {
		return err
	}
	if *dryRun {
		fmt.Fprintf(stdout, "dry run: would create %s in %s\n", b.AppDir(), *out)
		_, err := io.WriteString(stdout, packaging.Listing(entries))
		return err
	}
	if err := packaging.Assemble(entries, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "assembled %s\n", filepath.Join(*out, b.AppDir()))
	return nil
}

// parseImages reads "minimal/arm64,minimal/amd64".
func parseImages(s string) ([]packaging.ImageRef, error) {
	var refs []packaging.ImageRef
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, arch, ok := strings.Cut(f, "/")
		if !ok {
			return nil, fmt.Errorf("-images: %q is not NAME/ARCH", f)
		}
		refs = append(refs, packaging.ImageRef{Name: name, Arch: vm.Arch(arch)})
	}
	return refs, nil
}
