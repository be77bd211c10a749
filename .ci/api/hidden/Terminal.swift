import Cairn
let t = isTerminal(1)
