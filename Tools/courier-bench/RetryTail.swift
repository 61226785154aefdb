import RetryScenarios

/// `courier-bench --retry-tail` (and the virtual-time part of `make bench-drain`): issue 36's
/// scenarios, each under the default rules and with them `.disabled`, side by side.
func retryTailBenchmark(only: Set<Int> = []) async throws {
    say("-- the retry tail on virtual time: default rules, then .disabled (issue 36)")
    for (index, scenario) in RetryScenarios.all.enumerated() where only.isEmpty || only.contains(index + 1) {
        say("\(index + 1). \(scenario.name)")
        for rules in RetryScenarios.Rules.allCases {
            let result = try await RetryScenarios.run(scenario, rules)
            say("   \(result)")
        }
    }
}
