package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// doctorReport is what `airlock doctor` finds.
type doctorReport struct {
	Home   string          `json:"home"`
	Host   string          `json:"host"`
	Guests []guestReport   `json:"guests"`
	Images []imageInfo     `json:"images"`
	OK     bool            `json:"ok"`
	Issues []string        `json:"issues,omitempty"`
	Hosts  []vm.HostReport `json:"hypervisors"`
	// MacOS is what doctor finds on a Mac: nil elsewhere.
	MacOS *macReport `json:"macos,omitempty"`
	// Config is the user configuration file; Limits and OpenNetwork are
	// what a run gets from it and the defaults (before a project's
	// airlock.toml and the flags).
	Config      string        `json:"config"`
	Limits      config.Limits `json:"limits"`
	OpenNetwork bool          `json:"open_network"`
	LimitNotes  []string      `json:"limit_notes,omitempty"`
}

type guestReport struct {
	Arch  vm.Arch `json:"arch"`
	Agent string  `json:"agent,omitempty"`
	Image bool    `json:"image"`
	Issue string  `json:"issue,omitempty"`
}

func newDoctorCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run Airlock's VMs",
		Long: `doctor reports the hypervisor, the accelerator and why KVM is or is not
used, the guest link, the guest agent binaries and which images are present.
It exits with 1 when something needed for the host's architecture is
missing, and says how to fix it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := runDoctor(cmd.Context(), e)
			if err != nil {
				return err
			}
			if e.json {
				if err := e.printJSON(r); err != nil {
					return err
				}
			} else {
				printDoctor(e, r)
			}
			if !r.OK {
				e.exitCode = 1
			}
			return nil
		},
	}
}

func runDoctor(ctx context.Context, e *env) (*doctorReport, error) {
	h, err := e.home()
	if err != nil {
		return nil, err
	}
	r := &doctorReport{Home: h, Host: runtime.GOOS + "/" + runtime.GOARCH, OK: true}
	fail := func(s string) { r.OK = false; r.Issues = append(r.Issues, s) }

	if m := macHost(ctx); m != nil {
		r.MacOS = m
		for _, s := range m.issues() {
			fail(s)
		}
	}

	ims, err := image.ListAll(home.ImageRoots(h))
	if err != nil {
		fail(err.Error())
	}
	have := map[vm.Arch]bool{}
	for _, im := range ims {
		r.Images = append(r.Images, infoOf(im))
		if im.Name == image.DefaultName {
			have[im.Arch] = true
		}
	}

	if r.Config, err = config.UserPath(os.Getenv); err != nil {
		fail(err.Error())
	} else if u, err := config.LoadUser(r.Config); err != nil {
		fail(err.Error())
	} else if eff, err := config.Resolve(config.Sources{User: u, HostCPUs: runtime.NumCPU()}); err != nil {
		fail(err.Error())
	} else {
		r.Limits, r.OpenNetwork, r.LimitNotes = eff.Limits, eff.OpenNetwork, eff.Notes
	}

	backend, berr := newBackend(e, h)
	for _, arch := range []vm.Arch{vm.AMD64, vm.ARM64} {
		native := arch == vm.Arch(runtime.GOARCH)
		g := guestReport{Arch: arch, Image: have[arch]}
		if !g.Image {
			g.Issue = "no minimal image: " + image.BuildCommand(image.DefaultName, arch)
			if native {
				fail(g.Issue)
			}
		}
		if berr == nil {
			if d, ok := backend.(vm.Describer); ok {
				hr, err := d.Describe(ctx, arch)
				if err != nil {
					if native || !errors.Is(err, vm.ErrHypervisorMissing) {
						fail(err.Error())
					} else {
						g.Issue = strings.TrimSpace(g.Issue + "; " + err.Error())
					}
				} else {
					r.Hosts = append(r.Hosts, hr)
				}
			}
		}
		r.Guests = append(r.Guests, g)
	}
	if berr != nil {
		fail(berr.Error())
	}
	return r, nil
}

func printDoctor(e *env, r *doctorReport) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "home\t%s\n", r.Home)
	fmt.Fprintf(tw, "host\t%s\n", r.Host)
	if r.MacOS != nil {
		printMac(tw, r.MacOS)
	}
	for _, hr := range r.Hosts {
		fmt.Fprintf(tw, "hypervisor\t%s\n", hr.Hypervisor)
		fmt.Fprintf(tw, "  accelerator\t%s: %s\n", hr.Accelerator, hr.Why)
		fmt.Fprintf(tw, "  guest link\t%s\n", hr.Link)
		for _, n := range hr.Notes {
			fmt.Fprintf(tw, "  note\t%s\n", n)
		}
	}
	for _, g := range r.Guests {
		state := "ready"
		if g.Issue != "" {
			state = g.Issue
		}
		fmt.Fprintf(tw, "guest %s\t%s\n", g.Arch, state)
	}
	for _, i := range r.Images {
		fmt.Fprintf(tw, "image\t%s/%s: %s, %s\n", i.Name, i.Arch, i.Kernel, bytesize.Format(i.KernelBytes+i.InitrdBytes))
	}
	fmt.Fprintf(tw, "config\t%s\n", r.Config)
	fmt.Fprintf(tw, "limits\t%s\n", r.Limits)
	for _, n := range r.LimitNotes {
		fmt.Fprintf(tw, "  note\t%s\n", n)
	}
	if r.OpenNetwork {
		fmt.Fprintf(tw, "network\t%s\n", openNetworkWarning)
	} else {
		fmt.Fprintf(tw, "network\tnone (no network device; --open-network to give one)\n")
	}
	tw.Flush()
	if r.OK {
		fmt.Fprintln(e.stdout, "\nAirlock is ready to run VMs here.")
		return
	}
	fmt.Fprintln(e.stdout, "\nTo fix:")
	for _, s := range r.Issues {
		fmt.Fprintf(e.stdout, "  - %s\n", s)
	}
}
