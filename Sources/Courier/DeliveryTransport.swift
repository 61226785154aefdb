import Foundation

/// One HTTP POST to make.
public struct DeliveryRequest: Sendable, Hashable {
    /// Where to POST.
    public var url: URL
    /// Includes `Content-Type` and `Idempotency-Key`.
    public var headers: [String: String]
    /// Exactly the bytes `send` stored.
    public var body: Data
    /// The whole request must finish within this; the transport enforces it.
    public var timeout: Duration
    /// The message, also sent as `Idempotency-Key`.
    public var messageID: MessageID
    /// 1 for the first attempt.
    public var attempt: Int

    /// A request for attempt `attempt` of message `messageID`.
    public init(url: URL, headers: [String: String], body: Data, timeout: Duration, messageID: MessageID, attempt: Int) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.messageID = messageID
        self.attempt = attempt
    }
}

/// Sends one request and reports what happened. Implementations never throw: every failure is
/// a `DeliveryOutcome.failure`, classified for the retry policy. They must honour task
/// cancellation (report `.cancelled`) and `request.timeout`.
///
/// Defaults: URLSession on Apple platforms; AsyncHTTPClient on Linux, where URLSession hangs
/// until its timeout and silently re-sends POSTs when a server drops connections (see README).
public protocol DeliveryTransport: Sendable {
    /// POSTs `request` and reports what happened; never throws.
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome
    /// Releases connections. Called once by `Courier.close()`.
    func shutdown() async
}

extension DeliveryTransport {
    public func shutdown() async {}
}

/// The platform's default transport.
public func defaultTransport() -> any DeliveryTransport {
    defaultTransport(for: Courier.Configuration())
}

/// The platform's default transport for `configuration`: AsyncHTTPClient on Linux; on Apple
/// platforms URLSession, with the configuration's network-access policy.
func defaultTransport(for configuration: Courier.Configuration) -> any DeliveryTransport {
    #if canImport(AsyncHTTPClient)
    return AsyncHTTPClientTransport()
    #else
    return URLSessionTransport(configuration: URLSessionTransport.sessionConfiguration(for: configuration))
    #endif
}
