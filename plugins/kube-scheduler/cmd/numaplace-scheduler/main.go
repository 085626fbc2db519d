// Command numaplace-scheduler is kube-scheduler with numaplace's NUMAPlace
// plugin built in. It takes kube-scheduler's flags; run it as a second
// scheduler with a configuration whose profile enables the plugin (see
// deploy/scheduler-config.yaml and the module's README):
//
//	numaplace-scheduler --config scheduler-config.yaml
//
// The configuration file says which kubeconfig to use
// (clientConnection.kubeconfig: /etc/kubernetes/scheduler.conf on a
// control-plane node, "" in a pod for its service account) and the client
// rate (clientConnection.qps and burst): kube-scheduler ignores
// --kubeconfig, --kube-api-qps, --kube-api-burst and
// --kube-api-content-type when --config is given, and this command says so
// on standard error. Outside the cluster, write your kubeconfig's path into
// a copy of the file:
//
//	sed "s#/etc/kubernetes/scheduler.conf#$HOME/.kube/config#" deploy/scheduler-config.yaml > my-config.yaml
//	numaplace-scheduler --config my-config.yaml --leader-elect=false
//
// Pods select it with spec.schedulerName: numaplace-scheduler.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

func main() {
	os.Exit(cli.Run(command()))
}

// ignoredWithConfig are kube-scheduler's deprecated flags that --config
// overrides, with the configuration field to set instead.
var ignoredWithConfig = []struct{ flag, field string }{
	{"kubeconfig", "clientConnection.kubeconfig"},
	{"kube-api-qps", "clientConnection.qps"},
	{"kube-api-burst", "clientConnection.burst"},
	{"kube-api-content-type", "clientConnection.contentType"},
}

// command is kube-scheduler's command with the plugin registered; it warns
// of flags that --config makes kube-scheduler ignore.
func command() *cobra.Command {
	cmd := app.NewSchedulerCommand(app.WithPlugin(numaplace.Name, numaplace.New), app.WithPlugin(numaplace.DRAName, numaplace.NewDRA))
	cmd.Use = "numaplace-scheduler"
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("config"); f != nil && f.Changed {
			for _, ig := range ignoredWithConfig {
				if f := c.Flags().Lookup(ig.flag); f != nil && f.Changed {
					fmt.Fprintf(c.ErrOrStderr(), "numaplace-scheduler: --%s is ignored because --config is given: set %s in %s\n",
						ig.flag, ig.field, c.Flags().Lookup("config").Value)
				}
			}
		}
		return run(c, args)
	}
	return cmd
}
