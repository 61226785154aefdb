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
    /// The tags `send` was given: what `prepareRequest` picks credentials by (the account the
    /// message belongs to). Not sent; changing them changes nothing.
    public var tags: Set<String>

    /// A request for attempt `attempt` of message `messageID`.
    public init(
        url: URL, headers: [String: String], body: Data, timeout: Duration, messageID: MessageID, attempt: Int,
        tags: Set<String> = []
    ) {
        self.tags = tags
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
/// until its timeout and silently re-sends POSTs when a server drops connections (DocC: "Running on Linux").
public protocol DeliveryTransport: Sendable {
    /// POSTs `request` and reports what happened; never throws.
    func deliver(_ request: DeliveryRequest) async -> DeliveryOutcome
    /// Releases connections. Called once by `Courier.close()`.
    func shutdown() async
}

extension DeliveryTransport {
    public func shutdown() async {}
}

extension Courier.Configuration {
    /// The transport a courier opened with this configuration and no `transport` delivers
    /// through: URLSession on Apple platforms (with this configuration's network-access
    /// policy); AsyncHTTPClient on Linux when the package trait `AsyncHTTPClientTransport` is on.
    /// The caller owns it (`shutdown()` it when done).
    /// - Throws: `CourierError.Code.transportUnavailable` on Linux without that trait.
    public func defaultTransport() throws(CourierError) -> any DeliveryTransport {
        if let problem = Self.defaultTransportProblem { throw problem }
        return makeDefaultTransport()
    }

    /// Why this build has no default transport (with the fix), or nil where it has one.
    static let defaultTransportProblem: CourierError? = {
        #if canImport(FoundationNetworking) && !canImport(AsyncHTTPClient)
        // Never URLSession on Linux: it hangs until its timeout and re-sends POSTs unasked when
        // a server drops connections (DocC: "Running on Linux").
        return CourierError(
            .transportUnavailable,
            """
            Courier has no HTTP transport on Linux unless the package trait "AsyncHTTPClientTransport" \
            is on. Turn it on where your Package.swift depends on Courier: \
            .package(url: "<courier's URL>", from: "<version>", traits: ["AsyncHTTPClientTransport"]) \
            (in Courier's own repository: swift build --traits AsyncHTTPClientTransport), or set \
            Courier.Configuration.transport to a transport of your own. \
            URLSession is never the fallback: on Linux it hangs when a server drops connections.
            """)
        #else
        return nil
        #endif
    }()

    /// The default transport, where `defaultTransportProblem` is nil.
    func makeDefaultTransport() -> any DeliveryTransport {
        #if canImport(AsyncHTTPClient)
        return AsyncHTTPClientTransport(maximumConnectionsPerHost: maximumConcurrentDeliveries)
        #elseif canImport(FoundationNetworking)
        preconditionFailure(
            "no default transport on Linux without AsyncHTTPClient: defaultTransportProblem says so")
        #else
        return URLSessionTransport(configuration: URLSessionTransport.sessionConfiguration(for: self))
        #endif
    }
}
