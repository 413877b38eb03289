// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// The read side of an ENS registry and resolver (as Basenames deploys on Base), with open
/// setters, for `ens` proof tests against anvil.
contract MiniEnsRegistry {
    mapping(bytes32 => address) public resolver;

    function setResolver(bytes32 node, address r) external {
        resolver[node] = r;
    }
}

contract MiniEnsResolver {
    mapping(bytes32 => address) public addr;
    mapping(bytes32 => string) public name;

    function setAddr(bytes32 node, address a) external {
        addr[node] = a;
    }

    function setName(bytes32 node, string calldata n) external {
        name[node] = n;
    }
}
