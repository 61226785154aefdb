import CourierLog

extension Courier {
    /// Placeholder hook; the compactor is added in the next step.
    func compactIfWorthIt() {}
}
