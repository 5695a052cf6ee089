//! The highest rate (or concurrency) that meets every SLO: an exponential ramp, bisection to
//! a precision, repeats near the boundary, and a full-length confirmation trial.
