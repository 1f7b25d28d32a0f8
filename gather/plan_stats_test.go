package gather

import (
	"reflect"
	"testing"
	"time"
)

// TestPlanStatsAddSub: Add and Sub cover every field (set each to a
// distinct value through reflection, so a field added later and left out
// fails), and Sub undoes Add.
func TestPlanStatsAddSub(t *testing.T) {
	var p, q PlanStats
	pv, qv := reflect.ValueOf(&p).Elem(), reflect.ValueOf(&q).Elem()
	for i := range pv.NumField() {
		switch f := pv.Field(i); f.Kind() {
		case reflect.Uint64:
			f.SetUint(uint64(100 + i))
			qv.Field(i).SetUint(uint64(7 + i))
		case reflect.Int64: // time.Duration
			f.SetInt(int64(time.Duration(100+i) * time.Millisecond))
			qv.Field(i).SetInt(int64(time.Duration(7+i) * time.Millisecond))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and PlanStats.plus) about it", pv.Type().Field(i).Name, f.Kind())
		}
	}
	sum := reflect.ValueOf(p.Add(q))
	for i := range pv.NumField() {
		want := pv.Field(i).Convert(reflect.TypeOf(int64(0))).Int() + qv.Field(i).Convert(reflect.TypeOf(int64(0))).Int()
		if got := sum.Field(i).Convert(reflect.TypeOf(int64(0))).Int(); got != want {
			t.Errorf("Add: field %s is %d, want %d", pv.Type().Field(i).Name, got, want)
		}
	}
	if got := p.Add(q).Sub(q); got != p {
		t.Errorf("Sub does not undo Add: %+v, want %+v", got, p)
	}
	if got := q.Sub(p); got.Lookups != q.Lookups-p.Lookups || got.PlanTime != q.PlanTime-p.PlanTime {
		t.Errorf("a smaller less a larger: %+v", got)
	}
}
