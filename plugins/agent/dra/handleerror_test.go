package dra_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/plugins/agent/dra"
)

// TestHandleErrorSaysWhatToDo: a list-type numaNode the API server refuses
// is logged with what to do.
func TestHandleErrorSaysWhatToDo(t *testing.T) {
	e := newEnv(t)
	var log bytes.Buffer
	d, err := dra.New(e.node, e.gpus, e.nics, dra.Options{NodeName: "node-a", CDIRoot: e.cdiDir, ListAttributes: true,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	d.HandleError(context.Background(), errors.New(`ResourceSlice "x" is invalid: [spec.devices[0].attributes[resource.kubernetes.io/numaNode]: Invalid value: ""`), "publish")
	require.Contains(t, log.String(), "its DRAListTypeAttributes feature gate is off; run the agent without --dra-list-attributes")
}
