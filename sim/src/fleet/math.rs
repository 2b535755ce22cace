//! The little floating-point maths the fleet needs, written out because `core` has no `ln`.
//!
//! Why not `libm` or `std`: the simulator is `no_std` + `alloc` like the rest of the core, and
//! its results must be identical on every target (the committed tables are regenerated and
//! compared). Plain `+ − × ÷` on `f64` are exactly specified by IEEE 754, so these functions
//! give the same bits everywhere.

/// Natural logarithm of `x` (`x > 0`; non-positive or NaN input gives `NaN`).
///
/// Splits `x = m · 2^e` with `m` in `[√½, √2)`, then sums the `atanh` series
/// `ln m = 2·(t + t³/3 + t⁵/5 + …)` with `t = (m − 1)/(m + 1)`, `|t| < 0.172`: eight terms
/// reach ~1e-13 relative error, far below anything the simulator or a plot can show.
pub(crate) fn ln(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return f64::INFINITY;
    }
    let mut x = x;
    let mut exp: i64 = 0;
    // Subnormals: scale into the normal range first.
    if x < f64::MIN_POSITIVE {
        x *= (1u64 << 54) as f64;
        exp -= 54;
    }
    let bits = x.to_bits();
    exp += ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > core::f64::consts::SQRT_2 {
        m /= 2.0;
        exp += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let series = 1.0
        + t2 * (1.0 / 3.0
            + t2 * (1.0 / 5.0
                + t2 * (1.0 / 7.0 + t2 * (1.0 / 9.0 + t2 * (1.0 / 11.0 + t2 * (1.0 / 13.0 + t2 / 15.0))))));
    2.0 * t * series + exp as f64 * core::f64::consts::LN_2
}

/// Base-10 logarithm (for the plot's logarithmic time axis).
pub(crate) fn log10(x: f64) -> f64 {
    ln(x) / core::f64::consts::LN_10
}

#[cfg(test)]
mod tests {
    // The crate is no_std; its tests compare against std's own logarithm.
    extern crate std;

    use super::*;

    #[test]
    fn ln_matches_std_closely() {
        for &x in &[1e-300f64, 1e-9, 0.001, 0.3, 0.5, 0.7072, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300, 5e-324] {
            let want = x.ln();
            let got = ln(x);
            assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "ln({x}) = {got}, want {want}");
        }
        assert!(ln(0.0).is_nan() && ln(-1.0).is_nan() && ln(f64::NAN).is_nan());
        assert!((log10(1000.0) - 3.0).abs() < 1e-12);
    }
}
