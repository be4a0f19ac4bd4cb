package perfdb

import (
	"slices"
	"strings"
	"testing"
)

// TestDonors: the donor order of a transfer is by |log| of the ratio of
// the systems' datasheet memory bandwidths to the target's (the sample's
// system YAMLs: L40S 864, RTX PRO 6000 1,792, H200 4,800, B200 7,700
// GB/s), the excluded system left out, a target without a bandwidth
// refused.
func TestDonors(t *testing.T) {
	db := sampleDB(t)
	for _, c := range []struct {
		bw      float64
		exclude []string
		want    []string
	}{
		// H100 SXM, 3,350 GB/s: |log| 0.36 (H200), 0.63 (RTX), 0.83 (B200), 1.36 (L40S).
		{3350, nil, []string{"h200_sxm", "rtx_pro_6000_server", "b200_sxm", "l40s"}},
		// The H200 held out, from its own bandwidth: B200 0.47, RTX 0.99, L40S 1.71.
		{4800, []string{"h200_sxm"}, []string{"b200_sxm", "rtx_pro_6000_server", "l40s"}},
		// An L4, 300 GB/s: nearest the L40S.
		{300, nil, []string{"l40s", "rtx_pro_6000_server", "h200_sxm", "b200_sxm"}},
	} {
		got, err := Donors(db, c.bw, c.exclude...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%.0f GB/s without %v: %v, want %v", c.bw, c.exclude, got, c.want)
		}
	}
	if _, err := Donors(db, 0); err == nil || !strings.Contains(err.Error(), "want a datasheet figure") {
		t.Errorf("no bandwidth: %v", err)
	}
	all, _ := db.Systems()
	if _, err := Donors(db, 3350, all...); err == nil || !strings.Contains(err.Error(), "no system") {
		t.Errorf("every system left out: %v", err)
	}
}
