#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
@testable @_spi(CourierTesting) import CourierKit
import CourierLog
import CourierTesting
import FlakyServer
import Foundation
import NIOPosix
import Testing

/// Where the engine's runners run with AsyncHTTPClient: on the client's event loops when they
/// are NIO's process-wide ones (an outcome is recorded on the thread that heard it, and the next
/// request starts there), and on the cooperative pool when app code runs in the runner
/// (`prepareRequest`) or when the client's loops belong to a group the app may shut down.
@Suite struct RunnerPlacementTests {
    /// Delivers `count` messages to a loopback server; returns, for each, whether its
    /// `onDelivered` callback (called by the runner that recorded the outcome) ran on an
    /// event loop, and whether `prepareRequest` (when given) did.
    func deliver(
        count: Int, prepare: Bool, transport: AsyncHTTPClientTransport? = nil
    ) async throws -> (delivered: [Bool], prepared: [Bool]) {
        let server = try await FlakyServer(behavior: .init(failureRate: 0))
        let url = await server.url
        let scratch = TemporaryDirectory()
        let onLoop = Recorder<Bool>(), preparedOnLoop = Recorder<Bool>()
        var config = Courier.Configuration()
        config.allowsPurgeableDirectory = true
        config.transport = transport
        if prepare {
            config.prepareRequest = { _ in preparedOnLoop.add(MultiThreadedEventLoopGroup.currentEventLoop != nil) }
        }
        let courier = try Courier(directory: scratch.url, configuration: config)
        for i in 0..<count {
            try courier.send(["n": i], to: url) { _ in onLoop.add(MultiThreadedEventLoopGroup.currentEventLoop != nil) }
        }
        await courier.waitUntilIdle()
        await courier.close()
        await server.stop()
        return (onLoop.values, preparedOnLoop.values)
    }

    @Test(.timeLimit(.minutes(1)))
    func onItsOwnClientEachOutcomeIsRecordedOnTheEventLoopThatHeardIt() async throws {
        let (delivered, _) = try await deliver(count: 20, prepare: false)
        #expect(delivered.count == 20)
        #expect(delivered.allSatisfy { $0 }, "every outcome was recorded on an event loop: \(delivered)")
    }

    @Test(.timeLimit(.minutes(1)))
    func withPrepareRequestTheRunnersStayOffTheEventLoops() async throws {
        let (delivered, prepared) = try await deliver(count: 20, prepare: true)
        #expect(prepared.count == 20)
        #expect(!prepared.contains(true), "app code never holds up an event loop: \(prepared)")
        #expect(!delivered.contains(true), "\(delivered)")
    }

    /// An app's client on an event loop group of its own: the app may shut that group down
    /// before it closes the courier, and a job enqueued on a shut-down loop never runs.
    @Test(.timeLimit(.minutes(1)))
    func onAClientOfAnotherGroupTheRunnersStayOnTheCooperativePool() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = HTTPClient(eventLoopGroupProvider: .shared(group))
        let transport = AsyncHTTPClientTransport(client: client)
        #expect(transport.runnerExecutor == nil)
        let (delivered, _) = try await deliver(count: 5, prepare: false, transport: transport)
        #expect(delivered == Array(repeating: false, count: 5))
        try await client.shutdown()
        try await group.shutdownGracefully()
    }

    /// NIO's process-wide loops are never shut down: an app's client on them is safe too.
    @Test func onNIOsProcessWideLoopsEveryClientGetsALoopExecutor() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        #expect(AsyncHTTPClientTransport(client: client).runnerExecutor != nil)
        #expect(AsyncHTTPClientTransport().runnerExecutor != nil)
        try await client.shutdown()
    }
}

/// Values added from any thread.
private final class Recorder<Value: Sendable>: Sendable {
    private let box = Locked<[Value]>([])
    func add(_ value: Value) { box.withLock { $0.append(value) } }
    var values: [Value] { box.withLock { $0 } }
}
#endif
