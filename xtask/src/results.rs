//! Counting cargo's `test result:` lines into one total for the workspace.
//!
//! cargo prints one such line per test binary and per doc-test run, for example
//! `test result: FAILED. 12 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out;
//! finished in 0.31s`. libtest-mimic harnesses print the same format.

/// What the `test result:` lines seen so far add up to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Test binaries (and doc-test runs) that reported a result.
    pub binaries: u64,
}

impl Totals {
    /// Adds `line` if it is a `test result:` line; any other line is ignored.
    pub fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim_start().strip_prefix("test result:") else {
            return;
        };
        self.binaries += 1;
        let words: Vec<&str> = rest.split_whitespace().collect();
        for pair in words.windows(2) {
            let Ok(count) = pair[0].parse::<u64>() else {
                continue;
            };
            match pair[1].trim_end_matches([';', ',', '.']) {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Totals;

    fn count(text: &str) -> Totals {
        let mut totals = Totals::default();
        for line in text.lines() {
            totals.add_line(line);
        }
        totals
    }

    #[test]
    fn sums_every_result_line_and_nothing_else() {
        let output = "\
running 3 tests
test a ... ok
test b ... FAILED
test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

running 1 test
test c ... ignored, compile-fail suite
test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

test result: ok. 40 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 12.34s
";
        assert_eq!(
            count(output),
            Totals {
                passed: 42,
                failed: 1,
                binaries: 3
            }
        );
    }

    #[test]
    fn a_test_named_like_a_count_is_not_counted() {
        let output = "test passed ... ok\ntest 3 failed ... ok\n";
        assert_eq!(count(output), Totals::default());
    }
}
