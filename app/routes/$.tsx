// Any page path no route claims: Remix renders the root ErrorBoundary with a 404.
export const loader = () => {
  throw new Response("Not found", { status: 404 });
};

export default function NotFound() {
  return null;
}
