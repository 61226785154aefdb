import FlyingFox
enum FlakyPlaceholder {}
