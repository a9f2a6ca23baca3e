package confine

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func process(r Rules) (Result, error) {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var roDirs, roFiles, rwDirs, rwFiles, devs []string
	sort := func(paths []string, dirs, files *[]string) {
		for _, p := range paths {
			fi, err := os.Stat(p) // through links: /lib is /usr/lib
			switch {
			case err != nil:
			case fi.IsDir():
				*dirs = append(*dirs, p)
			default:
				*files = append(*files, p)
			}
		}
	}
	sort(r.Read, &roDirs, &roFiles)
	sort(r.Write, &rwDirs, &rwFiles)
	for _, d := range r.Devices {
		if _, err := os.Stat(d); err == nil {
			devs = append(devs, d)
		}
	}
	rules := []landlock.Rule{landlock.RODirs(roDirs...), landlock.ROFiles(roFiles...),
		landlock.RWDirs(rwDirs...), landlock.RWFiles(rwFiles...), landlock.RWFiles(devs...).WithIoctlDev()}
	// BestEffort: the strongest Landlock this kernel has (ABI 5 is file
	// systems, ioctl on devices and TCP).
	cfg := landlock.V5.BestEffort()
	if r.NoTCP {
		err = cfg.Restrict(rules...)
	} else {
		err = cfg.RestrictPaths(rules...)
	}
	if err != nil {
		return Result{}, fmt.Errorf("landlock: %w", err)
	}
	return Result{ABI: min(abi, 5)}, nil
}
