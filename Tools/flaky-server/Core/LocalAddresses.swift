import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension FlakyServer {
    /// This machine's IPv4 addresses that another device may reach: every interface that is up
    /// and not loopback (Wi-Fi, Ethernet; a VPN's or a container bridge's too: which one the
    /// phone shares is the user's to tell), with its name, in the order the system lists them.
    public static func localIPv4Addresses() -> [(interface: String, address: String)] {
        var first: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&first) == 0 else { return [] }
        defer { freeifaddrs(first) }
        var found: [(interface: String, address: String)] = []
        var next = first
        while let entry = next {
            next = entry.pointee.ifa_next
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
                entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0
            else { continue }
            var inet = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            let written = text.withUnsafeMutableBufferPointer { buffer in
                inet_ntop(AF_INET, &inet, buffer.baseAddress, socklen_t(buffer.count)).map { String(cString: $0) }
            }
            guard let written else { continue }
            found.append((interface: String(cString: entry.pointee.ifa_name), address: written))
        }
        return found
    }
}
