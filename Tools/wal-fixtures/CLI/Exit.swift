#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func exitProcess(_ status: Int32) -> Never { exit(status) }
