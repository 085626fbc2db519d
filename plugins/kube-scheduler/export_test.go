package numaplace

import "k8s.io/component-base/metrics"

// PlacementsTotal exposes numaplace_placements_total to the tests.
func PlacementsTotal() *metrics.CounterVec { return placementsTotal }

// RefusalsTotal exposes numaplace_refusals_total to the tests.
func RefusalsTotal() *metrics.CounterVec { return refusalsTotal }

// FilterDuration exposes numaplace_filter_duration_seconds to the tests.
func FilterDuration() *metrics.HistogramVec { return filterDuration }
