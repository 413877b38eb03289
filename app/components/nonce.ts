import { createContext, useContext } from "react";

// The script nonce of the page being rendered (entry.server.tsx makes one per answer and names
// it in the Content-Security-Policy). In the browser there is none: hydration runs no inline
// script, and browsers hide a nonce from the DOM anyway.
export const NonceContext = createContext<string | undefined>(undefined);

export const useNonce = (): string | undefined => useContext(NonceContext);
