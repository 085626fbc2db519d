// Command numaplace-scheduler is kube-scheduler with numaplace's NUMAPlace
// plugin built in. It takes kube-scheduler's flags; run it as a second
// scheduler with a configuration whose profile enables the plugin (see
// deploy/scheduler-config.yaml and the module's README):
//
//	numaplace-scheduler --config scheduler-config.yaml --kubeconfig ~/.kube/config
//
// Pods select it with spec.schedulerName: numaplace-scheduler.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

func main() {
	os.Exit(cli.Run(command()))
}

// command is kube-scheduler's command with the plugin registered.
func command() *cobra.Command {
	cmd := app.NewSchedulerCommand(app.WithPlugin(numaplace.Name, numaplace.New))
	cmd.Use = "numaplace-scheduler"
	return cmd
}
