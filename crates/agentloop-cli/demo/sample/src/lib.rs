//! tally: sums and averages of scores.

/// The sum of all scores.
pub fn total(scores: &[u32]) -> u32 {
    scores.iter().sum()
}

/// The mean of the scores, or `None` when there are none.
pub fn average(scores: &[u32]) -> Option<f64> {
    if scores.is_empty() {
        return None;
    }
    Some(total(scores) as f64 / (scores.len() - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages() {
        assert_eq!(average(&[2, 4]), Some(3.0));
        assert_eq!(average(&[]), None);
    }
}
