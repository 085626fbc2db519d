package topology

import (
	"errors"
	"reflect"
	"testing"

	"github.com/numaplace/numaplace/numa"
)

// panicsOnIndex lists the accessors that take a dense index and, as the
// Machine doc says, panic on one out of range (every index of a nil machine).
var panicsOnIndex = map[string]bool{
	"Node": true, "NodeCPUs": true, "NodeID": true, "CoreCPUs": true, "CoreNode": true, "SetOf": true,
	"NodeKind": true, "PodMemoryMiB": true,
}

// TestNilMachine calls every exported method of *Machine on a nil machine
// with zero arguments: each either answers "nothing" without panicking or,
// for the index accessors, panics as documented. A method added later is
// covered without changing the test.
func TestNilMachine(t *testing.T) {
	var m *Machine
	v := reflect.ValueOf(m)
	typ := v.Type()
	for i := range typ.NumMethod() {
		meth := typ.Method(i)
		args := make([]reflect.Value, meth.Type.NumIn()-1)
		for j := range args {
			args[j] = reflect.Zero(meth.Type.In(j + 1))
		}
		var out []reflect.Value
		panicked := func() (p bool) {
			defer func() {
				if recover() != nil {
					p = true
				}
			}()
			if meth.Type.IsVariadic() {
				out = v.Method(i).CallSlice(args)
			} else {
				out = v.Method(i).Call(args)
			}
			return false
		}()
		if panicked != panicsOnIndex[meth.Name] {
			t.Errorf("(*Machine)(nil).%s: panicked=%v, want %v", meth.Name, panicked, panicsOnIndex[meth.Name])
			continue
		}
		if panicked {
			continue
		}
		for _, o := range out {
			switch x := o.Interface().(type) {
			case error:
				if !errors.Is(x, ErrInvalid) {
					t.Errorf("(*Machine)(nil).%s: error %v does not unwrap to ErrInvalid", meth.Name, x)
				}
			case bool:
				if x {
					t.Errorf("(*Machine)(nil).%s: reported true on a nil machine", meth.Name)
				}
			case int:
				if x != 0 {
					t.Errorf("(*Machine)(nil).%s = %d, want 0", meth.Name, x)
				}
			}
			if o.Kind() == reflect.Slice && o.Len() != 0 {
				t.Errorf("(*Machine)(nil).%s returned %d items, want none", meth.Name, o.Len())
			}
		}
	}
	if _, err := m.MaskOf(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("(*Machine)(nil).MaskOf(0): error %v, want one that unwraps to ErrInvalid", err)
	}
	if got := m.IDsOf(^numa.Mask(0)); len(got) != 0 {
		t.Errorf("(*Machine)(nil).IDsOf(all bits) = %v, want none", got)
	}
}
